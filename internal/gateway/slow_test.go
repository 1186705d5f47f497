package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/gateway"
)

// shortHTTP is listener limits short enough for a test.
var shortHTTP = http.Server{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
	WriteTimeout: 300 * time.Millisecond, IdleTimeout: time.Second, MaxHeaderBytes: 8 << 10}

// shortLimits sets shortHTTP's limits on hs.
func shortLimits(hs *http.Server) {
	hs.ReadHeaderTimeout, hs.ReadTimeout, hs.WriteTimeout = shortHTTP.ReadHeaderTimeout, shortHTTP.ReadTimeout, shortHTTP.WriteTimeout
	hs.IdleTimeout, hs.MaxHeaderBytes = shortHTTP.IdleTimeout, shortHTTP.MaxHeaderBytes
}

// serve runs a gateway with cfg in front of upstream on a real listener
// through Serve, with the listener limits of shortHTTP.
func serve(t *testing.T, cfg gateway.Config, upstream http.Handler) string {
	t.Helper()
	return serveHTTP(t, cfg, upstream, shortLimits)
}

// serveHTTP is serve with the listener limits of limits.
func serveHTTP(t *testing.T, cfg gateway.Config, upstream http.Handler, limits func(*http.Server)) string {
	t.Helper()
	us := &http.Server{Handler: upstream}
	uln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = us.Serve(uln) }()
	t.Cleanup(func() { us.Close() })
	cfg.Upstream = "http://" + uln.Addr().String()
	var g *gateway.Gateway
	setupOpts(t, cfg, map[string]int64{"free": 1000}, func(o *gateway.Options) {
		o.Config.Upstream = cfg.Upstream
		o.HTTP = limits
		var err error
		if g, err = gateway.New(*o); err != nil {
			t.Fatal(err)
		}
	})
	return listenGateway(t, g, nil)
}

// closedWithin reads c until the server closes it, failing if that takes
// longer than limit (our own read deadline firing is the failure).
func closedWithin(t *testing.T, c net.Conn, limit time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after %v", limit)
	}
}

// TestSlowBodyIsCut: a client that sends its headers and a few bytes of a
// body, then stalls, is disconnected after the read timeout.
func TestSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	addr := serve(t, gateway.Config{AnonymousPolicy: "free"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabcde"); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, c, 10*time.Second) // the read timeout is 300ms
}

// TestSlowHeadersAreCut: the same for a client that never ends its headers.
func TestSlowHeadersAreCut(t *testing.T) {
	t.Parallel()
	addr := serve(t, gateway.Config{AnonymousPolicy: "free"}, http.NotFoundHandler())
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: a"); err != nil {
		t.Fatal(err)
	}
	closedWithin(t, c, 10*time.Second)
}

// TestHugeHeadersRefused: headers over max_header_bytes get 431.
func TestHugeHeadersRefused(t *testing.T) {
	t.Parallel()
	addr := serve(t, gateway.Config{AnonymousPolicy: "free"}, http.NotFoundHandler())
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 16<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB of headers over an 8 KiB limit: %d, want 431", resp.StatusCode)
	}
}

// TestStreamingRouteOutlivesTheWriteTimeout: a response still streaming
// after the write timeout is cut, unless its route has streaming: true.
func TestStreamingRouteOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		http.NewResponseController(w).Flush()
		select { // the stream's next event comes after the gateway's write timeout
		case <-time.After(3 * shortHTTP.WriteTimeout):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	addr := serve(t, gateway.Config{AnonymousPolicy: "free",
		Routes: []gateway.Route{{Path: "/events", Streaming: true}}}, stream)
	events := func(path string) []string {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got []string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				got = append(got, ev)
			}
		}
		return got
	}
	if got := events("/events"); len(got) != 2 {
		t.Errorf("streaming route: events %q, want both", got)
	}
	if got := events("/other"); len(got) != 1 {
		t.Errorf("ordinary route: events %q, want only the first (cut at the write timeout)", got)
	}
}

// TestHungUpstreamIsCutAtTheWriteTimeout: an upstream that never answers
// does not hold the gateway's request (and its upstream connection) past
// the write timeout.
func TestHungUpstreamIsCutAtTheWriteTimeout(t *testing.T) {
	t.Parallel()
	released := make(chan struct{})
	addr := serve(t, gateway.Config{AnonymousPolicy: "free"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // hung until the gateway gives up
		close(released)
	}))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request still open 10s after the 300ms write timeout")
	}
}

// listenGateway serves g on a loopback port until the test ends, through
// wrap when it is not nil (edge.Listen, for PROXY headers), and returns
// the address.
func listenGateway(t *testing.T, g *gateway.Gateway, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := ln
	if wrap != nil {
		served = wrap(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, served, time.Second) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}
