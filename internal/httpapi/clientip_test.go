package httpapi

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/sluicehq/sluice/internal/edge"
	"github.com/sluicehq/sluice/internal/enginetest"
)

func xff(v string) http.Header { return http.Header{"X-Forwarded-For": {v}} }

// TestKeylessLoopbackBehindProxies: with no key configured, only a client
// on this host is served; no forwarding header makes a remote client look
// local, and a local proxy naming a remote client does not make it local.
func TestKeylessLoopbackBehindProxies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, TrustedProxies: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"),
	}})
	tests := []struct {
		name, remote string
		header       http.Header
		status       int
	}{
		{"loopback, no header", "127.0.0.1:1", nil, 200},
		{"ipv6 loopback", "[::1]:1", nil, 200},
		{"remote", "203.0.113.7:1", nil, 403},
		{"remote claiming loopback in X-Forwarded-For", "203.0.113.7:1", xff("127.0.0.1"), 403},
		{"remote claiming loopback in Forwarded", "203.0.113.7:1", http.Header{"Forwarded": {"for=127.0.0.1"}}, 403},
		{"local trusted proxy for a remote client", "127.0.0.1:1", xff("203.0.113.7"), 403},
		{"local trusted proxy, remote client behind a spoofed loopback entry", "127.0.0.1:1", xff("127.0.0.1, 203.0.113.7"), 403},
		{"local trusted proxy for a local client", "127.0.0.1:1", xff("127.0.0.1"), 200},
		{"remote trusted proxy forwarding a loopback client", "10.0.0.5:1", xff("127.0.0.1"), 403},
		{"local trusted proxy, garbage header", "127.0.0.1:1", xff("nonsense"), 200},
		{"untrusted local peer's header is ignored", "127.0.0.2:1", xff("203.0.113.7"), 200},
	}
	for _, tt := range tests {
		if resp := b.do(call{method: "GET", path: "/v1/keys", remote: tt.remote, header: tt.header}); resp.StatusCode != tt.status {
			t.Errorf("%s: GET /v1/keys from %s %v = %d, want %d", tt.name, tt.remote, tt.header, resp.StatusCode, tt.status)
		}
	}
}

// remoteConn is a connection from a remote peer, as a proxyproto.Conn
// wraps it.
type remoteConn struct{ net.Conn }

func (remoteConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 4000}
}

// TestKeylessPROXYHeaderFromRemotePeer: a remote peer whose PROXY header
// said 127.0.0.1 (allowed with --proxy-protocol and no --trusted-proxies)
// has RemoteAddr 127.0.0.1, yet is not served as local: the TCP peer is
// not loopback.
func TestKeylessPROXYHeaderFromRemotePeer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c1, c2 := net.Pipe()
	t.Cleanup(func() { c1.Close(); c2.Close() })
	ctx := edge.ConnContext(context.Background(), proxyproto.NewConn(remoteConn{c1}))
	req := httptest.NewRequestWithContext(ctx, "GET", "/v1/keys", nil)
	req.RemoteAddr = "127.0.0.1:40000"
	rec := record(t, b.srv, req)
	if rec.Code != 403 {
		t.Errorf("keyless GET /v1/keys over a remote peer whose PROXY header claims 127.0.0.1 = %d, want 403", rec.Code)
	}
}

// TestKeylessOverPROXYProtocol serves the API on edge.Listen, trusting the
// proxy on 127.0.0.1, and sends PROXY v2 headers as HAProxy would.
func TestKeylessOverPROXYProtocol(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: b.srv, ConnContext: edge.ConnContext}
	go hs.Serve(edge.Listen(ln, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}))
	t.Cleanup(func() { hs.Close() })
	get := func(from, client string) (int, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if client != "" {
			h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP(client), Port: 1}, ln.Addr())
			if _, err := h.WriteTo(c); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := io.WriteString(c, "GET /v1/keys HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"); err != nil {
			return 0, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	tests := []struct {
		name, from, client string
		status             int // 0: the connection is closed
	}{
		{"local proxy for a remote client", "127.0.0.1", "198.51.100.7", 403},
		{"local proxy for a local client", "127.0.0.1", "127.0.0.1", 200},
		{"local proxy, no header", "127.0.0.1", "", 200},
		{"untrusted peer claiming loopback", "127.0.0.2", "127.0.0.1", 0},
	}
	for _, tt := range tests {
		got, err := get(tt.from, tt.client)
		if got != tt.status {
			t.Errorf("%s: status = %d (%v), want %d", tt.name, got, err, tt.status)
		}
	}
}

// TestUnknownCodesLimitedPerClientBehindProxy: behind a trusted proxy the
// unknown-code limit counts each client its headers name; from an
// untrusted peer the headers are ignored and the peer pays.
func TestUnknownCodesLimitedPerClientBehindProxy(t *testing.T) {
	t.Parallel()
	b, _ := setupLinks(t, netip.MustParsePrefix("10.0.0.0/8"))
	lookup := func(remote string, h http.Header) int {
		return b.do(call{method: "GET", path: "/nothing", remote: remote, header: h}).StatusCode
	}
	for i := range 5 {
		if got := lookup("10.0.0.1:1", xff("198.51.100.1")); got != 404 {
			t.Fatalf("client 1's unknown code #%d = %d, want 404", i, got)
		}
	}
	if got := lookup("10.0.0.2:1", http.Header{"Forwarded": {`for="198.51.100.1:5"`}}); got != 429 {
		t.Errorf("client 1 through another proxy = %d, want 429", got)
	}
	if got := lookup("10.0.0.1:1", xff("198.51.100.2")); got != 404 {
		t.Errorf("client 2 behind the same proxy = %d, want 404", got)
	}
	for i := range 5 {
		if got := lookup("203.0.113.9:1", xff("198.51.100."+strconv.Itoa(10+i))); got != 404 {
			t.Fatalf("untrusted peer's unknown code #%d = %d, want 404", i, got)
		}
	}
	if got := lookup("203.0.113.9:1", xff("198.51.100.99")); got != 429 {
		t.Errorf("untrusted peer varying X-Forwarded-For = %d, want 429 (the peer pays)", got)
	}
}

// TestAccessLogShowsClient: the access log's remote is the client; peer,
// the proxy it came through.
func TestAccessLogShowsClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var logs enginetest.LogBuffer
	b.srv = New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Keys: b.db,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	b.do(call{method: "GET", path: "/v1/keys", remote: "10.0.0.1:4444", header: xff("198.51.100.7")})
	b.do(call{method: "GET", path: "/v1/keys", remote: "203.0.113.9:5555", header: xff("198.51.100.8")})
	out := logs.String()
	for _, want := range []string{"remote=198.51.100.7 peer=10.0.0.1:4444", "remote=203.0.113.9\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("access log lacks %q:\n%s", want, out)
		}
	}
}
