package edge_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/sluicehq/sluice/internal/edge"
)

// serve runs an HTTP server on Listen(trusted) answering
// "RemoteAddr peer", and returns its address.
func serve(t *testing.T, trusted ...netip.Prefix) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{
		ConnContext: edge.ConnContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			peer, _, _ := net.SplitHostPort(edge.Peer(r))
			fmt.Fprintf(w, "%s %s", host, peer)
		}),
	}
	go hs.Serve(edge.Listen(ln, trusted))
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

// get dials addr from local (a loopback address), writes header (if any)
// and a GET, and returns the answer's body, or the error.
func get(t *testing.T, addr, local string, header *proxyproto.Header) (string, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if header != nil {
		if _, err := header.WriteTo(c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func header(version byte, client string) *proxyproto.Header {
	return proxyproto.HeaderProxyFromAddrs(version,
		&net.TCPAddr{IP: net.ParseIP(client), Port: 40000}, &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 80})
}

func TestListen(t *testing.T) {
	t.Parallel()
	open := serve(t)
	lb := serve(t, netip.MustParsePrefix("127.0.0.1/32"))
	tests := []struct {
		name, addr, local string
		header            *proxyproto.Header
		want              string // "" for a refused connection
	}{
		{"no list: v2 header from anyone", open, "127.0.0.2", header(2, "198.51.100.7"), "198.51.100.7 127.0.0.2"},
		{"no list: v1 header", open, "127.0.0.2", header(1, "198.51.100.8"), "198.51.100.8 127.0.0.2"},
		{"no list: ipv6 client", open, "127.0.0.2", header(2, "2001:db8::7"), "2001:db8::7 127.0.0.2"},
		{"no list: no header", open, "127.0.0.2", nil, "127.0.0.2 127.0.0.2"},
		{"trusted peer's header", lb, "127.0.0.1", header(2, "198.51.100.7"), "198.51.100.7 127.0.0.1"},
		{"trusted peer without a header", lb, "127.0.0.1", nil, "127.0.0.1 127.0.0.1"},
		{"untrusted peer's header is refused", lb, "127.0.0.2", header(2, "198.51.100.7"), ""},
		{"untrusted peer claiming loopback is refused", lb, "127.0.0.2", header(1, "127.0.0.1"), ""},
		{"untrusted peer without a header", lb, "127.0.0.2", nil, "127.0.0.2 127.0.0.2"},
	}
	for _, tt := range tests {
		got, err := get(t, tt.addr, tt.local, tt.header)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%s: answered %q, want the connection closed", tt.name, got)
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("%s: RemoteAddr and Peer = %q (%v), want %q", tt.name, got, err, tt.want)
		}
	}
}

func TestPeerWithoutListen(t *testing.T) {
	t.Parallel()
	r, _ := http.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:5"
	if got := edge.Peer(r); got != r.RemoteAddr {
		t.Errorf("Peer = %q, want RemoteAddr %q", got, r.RemoteAddr)
	}
}
