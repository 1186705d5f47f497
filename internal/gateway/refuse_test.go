package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/gateway"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// countingListener counts the connections it accepts and the bytes the
// server read from them.
type countingListener struct {
	net.Listener
	accepts atomic.Int64
	read    atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepts.Add(1)
		c = &countingConn{Conn: c, read: &l.read}
	}
	return c, err
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestRefusalKeepsTheConnection: refusals of requests with a body, before
// the gateway read the body, after it read all of it, and after it read
// part of a body still being streamed, answer 429 on the client's
// connection, which then serves the next request (one connection
// accepted for the whole sequence), over HTTP/1.1 and HTTP/2 (TLS); the
// server logs no panic. Before, net/http drained the unread body after
// the handler returned, in full duplex, and then panicked ("invalid
// concurrent Body.Read call", a stack in the log) reading the next
// request, dropping the connection.
func TestRefusalKeepsTheConnection(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			testRefusalKeepsTheConnection(t, proto)
		})
	}
}

func testRefusalKeepsTheConnection(t *testing.T, proto string) {
	var logs enginetest.LogBuffer
	cfg := gateway.Config{AnonymousPolicy: "free", Routes: []gateway.Route{
		{Path: "/upload", Policies: []string{"upload"}},
		{Path: "/login", Methods: []string{"POST"}, Policies: []string{}, AccountField: "user", AccountPolicy: "account"},
	}}
	var g *gateway.Gateway
	var ca *tlstest.CA
	setupOpts(t, cfg, map[string]int64{"free": 1000, "upload": 1, "account": 1}, func(o *gateway.Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		if proto == "HTTP/2.0" {
			ca = tlstest.NewCA(t, "gateway CA")
			leaf := ca.Server(t, "gateway")
			r, err := tlsconf.New(tlsconf.Options{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile,
				NextProtos: []string{"h2", "http/1.1"}, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			o.TLS = r.Config()
		}
		var err error
		if g, err = gateway.New(*o); err != nil {
			t.Fatal(err)
		}
	})
	var ln *countingListener
	addr := listenGateway(t, g, func(l net.Listener) net.Listener { ln = &countingListener{Listener: l}; return ln })

	tr := &http.Transport{MaxConnsPerHost: 1}
	base := "http://" + addr
	if proto == "HTTP/2.0" {
		tr.ForceAttemptHTTP2 = true
		tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12}
		base = "https://" + addr
	}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 20 * time.Second}

	// streamed is a body sent in two parts: the second once the
	// gateway has read as many bytes as the first holds.
	streamed := func(body []byte, first int) io.Reader {
		pr, pw := io.Pipe()
		from := ln.read.Load()
		go func() {
			if _, err := pw.Write(body[:first]); err != nil {
				return
			}
			_, _ = enginetest.Poll(10*time.Second, func() error {
				return enginetest.State(ln.read.Load()-from >= int64(first), "read %d", ln.read.Load()-from)
			})
			_, _ = pw.Write(body[first:])
			pw.Close()
		}()
		return pr
	}
	big := []byte(`{"user":"carol","pad":"` + strings.Repeat("x", 100<<10) + `"}`)
	steps := []struct {
		name     string
		path     string
		body     []byte
		streamed bool
		want     int
	}{
		{"upload admitted", "/upload", bytes.Repeat([]byte("u"), 10<<10), false, 200},
		{"refused before the body is read", "/upload", bytes.Repeat([]byte("u"), 10<<10), false, 429},
		{"next request", "/hello", nil, false, 200},
		{"login admitted", "/login", []byte(`{"user":"bob"}`), false, 200},
		{"refused after the whole body was read", "/login", []byte(`{"user":"bob"}`), false, 429},
		{"next request after the login", "/hello", nil, false, 200},
		{"large login admitted", "/login", big, false, 200},
		{"refused after part of a streamed body was read", "/login", big, true, 429},
		{"next request after the large login", "/hello", nil, false, 200},
	}
	for i, s := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var body io.Reader
		method := "GET"
		if s.body != nil {
			method, body = "POST", bytes.NewReader(s.body)
			if s.streamed {
				body = streamed(s.body, 80<<10)
			}
		}
		reused := false
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }})
		req, err := http.NewRequestWithContext(ctx, method, base+s.path, body)
		if err != nil {
			t.Fatal(err)
		}
		if s.body != nil {
			req.ContentLength = int64(len(s.body))
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", s.name, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		if err != nil || resp.StatusCode != s.want || resp.Proto != proto {
			t.Fatalf("%s: %s %d %q (%v), want %s %d", s.name, resp.Proto, resp.StatusCode, b, err, proto, s.want)
		}
		if i > 0 && !reused {
			t.Errorf("%s: sent on a new connection, want the previous one kept", s.name)
		}
	}
	if n := ln.accepts.Load(); n != 1 {
		t.Errorf("the gateway accepted %d connections for %d requests in sequence, want 1", n, len(steps))
	}
	if l := logs.String(); strings.Contains(l, "panic") {
		t.Errorf("the gateway's log has a panic:\n%s", l)
	}
}

// TestEarlyAnswerKeepsTheConnection: an admitted request whose upstream
// answers (413, hanging up) after reading only the part of the body the
// client sent so far: the client gets the answer at once, sends the rest
// of its body then, and its next request on the same connection is
// served; the server logs no panic. Before, the answer waited for the
// body's end (the handler waited for the proxy's read of it) and the
// body's end, drained once the handler returned, broke the connection.
func TestEarlyAnswerKeepsTheConnection(t *testing.T) {
	t.Parallel()
	const first, rest = 10 << 10, 90 << 10
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/early" {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "hello")
			return
		}
		if _, err := io.ReadFull(r.Body, make([]byte, first)); err != nil {
			return
		}
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		c.Close()
	}))
	t.Cleanup(up.Close)
	var logs enginetest.LogBuffer
	var g *gateway.Gateway
	setupOpts(t, gateway.Config{AnonymousPolicy: "free"}, map[string]int64{"free": 1000}, func(o *gateway.Options) {
		o.Config.Upstream = up.URL
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		var err error
		if g, err = gateway.New(*o); err != nil {
			t.Fatal(err)
		}
	})
	var ln *countingListener
	addr := listenGateway(t, g, func(l net.Listener) net.Listener { ln = &countingListener{Listener: l}; return ln })
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "POST /early HTTP/1.1\r\nHost: gw\r\nContent-Length: %d\r\n\r\n", first+rest)
	if _, err := c.Write(bytes.Repeat([]byte("a"), first)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer before the rest of the body: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Close {
		t.Fatalf("early answer = %d (close %v), want 413 on a kept connection", resp.StatusCode, resp.Close)
	}
	if _, err := c.Write(bytes.Repeat([]byte("a"), rest)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /hello HTTP/1.1\r\nHost: gw\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the next request on the connection: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello" {
		t.Errorf("the next request on the connection = %d %q, want 200 hello", resp.StatusCode, b)
	}
	if n := ln.accepts.Load(); n != 1 {
		t.Errorf("accepted %d connections, want 1", n)
	}
	if l := logs.String(); strings.Contains(l, "panic") {
		t.Errorf("the gateway's log has a panic:\n%s", l)
	}
}
