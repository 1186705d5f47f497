package enginetest

import (
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// DNS is a small authoritative DNS server on loopback UDP for tests: it
// answers TXT queries from records a test sets (SetTXT), NXDOMAIN for any
// name it has none for, and an empty answer for other types. Point a
// net.Resolver at Addr (PreferGo, Dial to Addr). It is safe for concurrent
// use; StartDNS stops it when the test ends.
type DNS struct {
	// Addr is the server's host:port on 127.0.0.1.
	Addr string

	conn    net.PacketConn
	mu      sync.Mutex
	txt     map[string][]string // lower-case name without the trailing dot
	queries atomic.Int64
}

// StartDNS listens on 127.0.0.1:0 over UDP and serves until the test ends.
func StartDNS(t testing.TB) *DNS {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("test DNS server: %v", err)
	}
	d := &DNS{Addr: conn.LocalAddr().String(), conn: conn, txt: map[string][]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.serve()
	}()
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	return d
}

// SetTXT makes name (any case, with or without the trailing dot) answer
// one TXT record per value; no values removes it, so it answers NXDOMAIN.
func (d *DNS) SetTXT(name string, values ...string) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(values) == 0 {
		delete(d.txt, name)
		return
	}
	d.txt[name] = append([]string(nil), values...)
}

// Queries is how many queries the server has answered.
func (d *DNS) Queries() int64 { return d.queries.Load() }

func (d *DNS) serve() {
	buf := make([]byte, 1500)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		resp, err := d.answer(buf[:n])
		if err != nil {
			continue // not a query we can read: dropped, as a server would
		}
		d.queries.Add(1)
		_, _ = d.conn.WriteTo(resp, from)
	}
}

// answer builds the response to the query msg.
func (d *DNS) answer(msg []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	d.mu.Lock()
	values, ok := d.txt[name]
	d.mu.Unlock()
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if ok && q.Type == dnsmessage.TypeTXT {
		for _, v := range values {
			rr := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeTXT, Class: dnsmessage.ClassINET, TTL: 1}
			if err := b.TXTResource(rr, dnsmessage.TXTResource{TXT: splitTXT(v)}); err != nil {
				return nil, err
			}
		}
	}
	return b.Finish()
}

// splitTXT cuts a value into the 255-byte strings a TXT record holds.
func splitTXT(v string) []string {
	var out []string
	for len(v) > 255 {
		out = append(out, v[:255])
		v = v[255:]
	}
	return append(out, v)
}
