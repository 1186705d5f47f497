package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	neturl "net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// cutProxy forwards TCP connections to a PostgreSQL server until cut:
// then it drops the connections it holds and hangs up on every new one
// (a failed connect, as when the server is down). It counts the
// connections it accepts: the store's dials.
type cutProxy struct {
	ln      net.Listener
	target  string
	accepts atomic.Int64
	mu      sync.Mutex
	down    bool
	conns   map[net.Conn]struct{}
}

// cutStore opens a store on a fresh schema of the test PostgreSQL,
// migrated, through a cutProxy the test cuts to make an outage.
func cutStore(t *testing.T) (*store.DB, *cutProxy) {
	t.Helper()
	u, err := neturl.Parse(enginetest.PostgresSchema(t, enginetest.PostgresURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	db, err := store.Open(t.Context(), store.Options{URL: u.String(), MaxOpenConns: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return db, proxy
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepts.Add(1)
			go p.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done; p.cut() })
	return p
}

func (p *cutProxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// cut drops every connection and refuses new ones until restore.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// TestUnknownCodeLimitHoldsDuringAStoreOutage cuts the link store's
// PostgreSQL under a server on a real listener. One client sending 40
// random codes, limited to 5 unknown codes a minute, gets at most 5
// answers that are not 429 (each a 503 with Retry-After), then 429s; 40
// clients with a random code each get 503 with Retry-After (the slowest
// lookup is logged, not asserted: timings flake on a loaded machine);
// the store is dialled a bounded number of times for the 80 lookups (one
// retry window and a probe per pause, not a retry loop per code); once the database is back a known code
// redirects again. Before, the limiter counted only "not found": every
// code held its request for 3 s of retries, and the client was never
// limited.
func TestUnknownCodeLimitHoldsDuringAStoreOutage(t *testing.T) {
	t.Parallel()
	db, proxy := cutStore(t)
	svc := newLinks(t, shorten.Options{Store: db, Limiter: unknownCodeLimiter(t), Targets: ownHost})
	srv := New(Options{Logger: slog.New(slog.DiscardHandler), Keys: db, Links: svc,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	l, err := svc.Create(t.Context(), shorten.CreateRequest{URL: "https://example.com/known", Owner: "t", Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	svc.Forget(l.Code) // uncached: its redirect needs the store

	client := &http.Client{Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(code, from string) (*http.Response, time.Duration) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/"+code, nil)
		req.Header.Set("X-Forwarded-For", from)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET /%s: %v", code, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, time.Since(start)
	}
	randomCode := func() string {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return "z" + hex.EncodeToString(b[:])[:6]
	}

	proxy.cut()
	before := proxy.accepts.Load()
	slowest := outageAnswers(t, "code", func(from string) (*http.Response, time.Duration) { return get(randomCode(), from) })
	dials := proxy.accepts.Load() - before
	t.Logf("%d dials to the database for 80 lookups of uncached codes during the outage; the slowest lookup with the outage known took %v",
		dials, slowest.Round(time.Millisecond))
	if dials > 30 {
		t.Errorf("the store was dialled %d times for 80 lookups during the outage, want a bounded number (one retry window and probes)", dials)
	}

	proxy.restore()
	start := time.Now()
	n := 0
	enginetest.EventuallyNil(t, 30*time.Second, "the known code redirects after the outage", func() error {
		n++ // a client of its own each time: 503s count against a client's limit
		resp, _ := get(l.Code, "192.0.2."+strconv.Itoa(n%250+1))
		return enginetest.State(resp.StatusCode == http.StatusFound && resp.Header.Get("Location") == "https://example.com/known",
			"GET /%s = %d", l.Code, resp.StatusCode)
	})
	t.Logf("the known code redirects %v after the database came back", time.Since(start).Round(time.Millisecond))
}

// outageAnswers asks, through get (a random unknown id, from a client
// address), 40 times from one client limited to 5 unknown ids a minute
// and once from each of 40 other clients, during a store outage: the
// limited client gets at most 5 answers that are not 429 (each a 503 with
// Retry-After), every other client a 503 with Retry-After. It returns the
// slowest of the 40 clients' answers.
func outageAnswers(t *testing.T, what string, get func(from string) (*http.Response, time.Duration)) time.Duration {
	t.Helper()
	answered := 0
	for i := range 40 {
		resp, _ := get("198.51.100.7")
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
		case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
			answered++
		default:
			t.Fatalf("unknown %s %d during the outage = %d (Retry-After %q), want 503 with Retry-After or 429",
				what, i, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if answered > 5 {
		t.Errorf("one client limited to 5 unknown %ss a minute got %d answers other than 429 for 40 random %ss during the outage", what, answered, what)
	}
	var slowest time.Duration
	for i := range 40 {
		resp, took := get("203.0.113." + strconv.Itoa(i+1))
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("client %d's unknown %s during the outage = %d (Retry-After %q), want 503 with Retry-After",
				i, what, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		slowest = max(slowest, took)
	}
	return slowest
}
