package gateway_test

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/gateway"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/ratelimit"
)

// upstream records what reaches it.
type upstream struct {
	mu     sync.Mutex
	bodies []string
	xff    []string
	fwd    []string
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, string(b))
	u.xff = append(u.xff, r.Header.Get("X-Forwarded-For"))
	u.fwd = append(u.fwd, r.Header.Get("Forwarded"))
	u.mu.Unlock()
	w.Header().Set("X-Upstream", "yes")
	_, _ = io.WriteString(w, "hello")
}

func (u *upstream) last() (body, xff string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bodies[len(u.bodies)-1], u.xff[len(u.xff)-1]
}

// setup runs a gateway with cfg (upstream filled in) over a service whose
// policies are hourly fixed windows of the given limits.
func setup(t *testing.T, cfg gateway.Config, policies map[string]int64, trusted ...netip.Prefix) (*httptest.Server, *upstream, *limits.Service) {
	t.Helper()
	return setupOpts(t, cfg, policies, func(o *gateway.Options) { o.TrustedProxies = trusted })
}

// setupOpts is setup with the gateway's options changed by edit (the
// store, with its API keys, is o.Keys unless edit sets it to nil).
func setupOpts(t *testing.T, cfg gateway.Config, policies map[string]int64, edit func(o *gateway.Options)) (*httptest.Server, *upstream, *limits.Service) {
	t.Helper()
	up := &upstream{}
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	db, rules := openRules(t)
	svc, err := limits.NewService(limits.Options{Rules: rules, Counters: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range policies {
		p := limits.NamedPolicy{Name: name, Algorithm: ratelimit.FixedWindow, Limit: n, Period: limits.Period(time.Hour)}
		if _, err := svc.PutPolicy(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Upstream = us.URL
	return serveGateway(t, gateway.Options{Config: cfg, Limits: svc, Keys: db}, edit), up, svc
}

// serveGateway serves a gateway of opts, as edit changes them, on a test
// server closed when t ends.
func serveGateway(t *testing.T, opts gateway.Options, edit func(*gateway.Options)) *httptest.Server {
	t.Helper()
	edit(&opts)
	g, err := gateway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	gs := httptest.NewServer(g)
	t.Cleanup(gs.Close)
	return gs
}

type req struct {
	method, path, body string
	apiKey, xff        string
}

func do(t *testing.T, gs *httptest.Server, r req) *http.Response {
	t.Helper()
	hr, err := http.NewRequest(cmp.Or(r.method, "GET"), gs.URL+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+r.apiKey)
	}
	if r.xff != "" {
		hr.Header.Set("X-Forwarded-For", r.xff)
	}
	if r.body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

type problem struct {
	Type     string   `json:"type"`
	Status   int      `json:"status"`
	Violated []string `json:"violated-policies"`
}

func TestTiersQuotaAndLoadShedding(t *testing.T) {
	t.Parallel()
	cfg := gateway.Config{
		Tiers:           map[string]string{"gold-key": "gold"},
		DefaultTier:     "bronze",
		AnonymousPolicy: "anon",
		Global:          gateway.Global{Policy: "global"},
	}
	var other string // a stored key that gateway.tiers does not name
	gs, _, _ := setupOpts(t, cfg, map[string]int64{"gold": 5, "bronze": 2, "anon": 1, "global": 6}, func(o *gateway.Options) {
		other = storedKey(t, o, false)
	})
	tests := []struct {
		name      string
		r         req
		status    int
		limit     string
		problem   string
		violation string
	}{
		{"gold tier", req{path: "/a", apiKey: "gold-key"}, 200, "5", "", ""},
		{"stored key not in tiers gets the default tier", req{path: "/a", apiKey: other}, 200, "2", "", ""},
		{"anonymous by IP", req{path: "/a"}, 200, "1", "", ""},
		{"anonymous over its quota", req{path: "/a"}, 429, "1", "quota-exceeded", "anon"},
		{"default tier again", req{path: "/a", apiKey: other}, 200, "2", "", ""},
		{"default tier over quota", req{path: "/a", apiKey: other}, 429, "2", "quota-exceeded", "bronze"},
		{"gold again", req{path: "/a", apiKey: "gold-key"}, 200, "5", "", ""},
		{"gold again", req{path: "/a", apiKey: "gold-key"}, 200, "5", "", ""},
		{"global capacity reached: 503 for a client within its quota", req{path: "/a", apiKey: "gold-key"}, 503, "5", "temporary-reduced-capacity", "global"},
	}
	for _, tt := range tests {
		resp := do(t, gs, tt.r)
		if resp.StatusCode != tt.status {
			t.Fatalf("%s: status %d, want %d", tt.name, resp.StatusCode, tt.status)
		}
		if resp.Header.Get("X-RateLimit-Limit") == "" || resp.Header.Get("RateLimit-Policy") == "" || resp.Header.Get("RateLimit") == "" {
			t.Errorf("%s: rate limit headers missing: %v", tt.name, resp.Header)
		}
		if !strings.Contains(resp.Header.Get("RateLimit-Policy"), ";q="+tt.limit+";") {
			t.Errorf("%s: RateLimit-Policy %q, want the client's quota q=%s", tt.name, resp.Header.Get("RateLimit-Policy"), tt.limit)
		}
		if tt.problem == "" {
			if resp.Header.Get("X-Upstream") != "yes" {
				t.Errorf("%s: allowed but not proxied", tt.name)
			}
			continue
		}
		if ra := resp.Header.Get("Retry-After"); ra == "" || strings.ContainsAny(ra, ".-") {
			t.Errorf("%s: Retry-After %q, want whole seconds", tt.name, ra)
		}
		var p problem
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !strings.HasSuffix(p.Type, tt.problem) || len(p.Violated) != 1 || p.Violated[0] != tt.violation {
			t.Errorf("%s: problem %+v, want type ending %s listing %s", tt.name, p, tt.problem, tt.violation)
		}
	}
}

func TestLoginRouteLimitsIPAndAccount(t *testing.T) {
	t.Parallel()
	cfg := gateway.Config{
		Routes: []gateway.Route{{Path: "/login", Methods: []string{"POST"}, Policies: []string{},
			IPPolicy: "login_ip", AccountField: "username", AccountPolicy: "login_account"}},
	}
	gs, up, _ := setup(t, cfg, map[string]int64{"login_ip": 4, "login_account": 2}, netip.MustParsePrefix("127.0.0.1/32"))
	login := func(ip, user string) int {
		body := `{"username":"` + user + `","password":"hunter2"}`
		resp := do(t, gs, req{method: "POST", path: "/login", body: body, xff: ip})
		if resp.StatusCode == 200 {
			if got, xff := up.last(); got != body || !strings.HasPrefix(xff, ip) {
				t.Errorf("upstream got body %q from %q, want %q from %s", got, xff, body, ip)
			}
		}
		return resp.StatusCode
	}
	steps := []struct {
		ip, user string
		status   int
	}{
		{"198.51.100.1", "ann", 200},
		{"198.51.100.2", "ann", 200},
		{"198.51.100.3", "ann", 429}, // brute force on ann, from any IP
		{"198.51.100.1", "bob", 200}, // the office behind one IP is not locked out
		{"198.51.100.1", "cid", 200},
		{"198.51.100.1", "dan", 200},
		{"198.51.100.1", "eve", 429}, // one IP, many accounts
	}
	for i, s := range steps {
		if got := login(s.ip, s.user); got != s.status {
			t.Errorf("login %d (%s as %s) = %d, want %d", i+1, s.ip, s.user, got, s.status)
		}
	}
}

func TestForwardedForOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	gs, _, svc := setup(t, gateway.Config{AnonymousPolicy: "anon"}, map[string]int64{"anon": 5}, netip.MustParsePrefix("10.0.0.0/8"))
	// The test client is 127.0.0.1, not trusted: its X-Forwarded-For is ignored.
	do(t, gs, req{path: "/", xff: "203.0.113.50"})
	if st, _ := svc.Peek(t.Context(), "anon", "ip:127.0.0.1"); st.Remaining != 4 {
		t.Errorf("untrusted peer: ip:127.0.0.1 has %d left, want 4 (the header ignored)", st.Remaining)
	}
	if st, _ := svc.Peek(t.Context(), "anon", "ip:203.0.113.50"); st.Remaining != 5 {
		t.Errorf("untrusted peer: the spoofed IP was charged")
	}
}

// TestForwardedHeader: a trusted proxy's Forwarded header names the client,
// who reaches the upstream in X-Forwarded-For; a client's own is neither
// believed nor passed on to an upstream that may trust the gateway.
func TestForwardedHeader(t *testing.T) {
	t.Parallel()
	send := func(gs *httptest.Server, fwd string) {
		hr, _ := http.NewRequest("GET", gs.URL+"/", nil)
		hr.Header.Set("Forwarded", fwd)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	gs, up, svc := setup(t, gateway.Config{AnonymousPolicy: "anon"}, map[string]int64{"anon": 5}, netip.MustParsePrefix("127.0.0.1/32"))
	send(gs, `for="[2001:db8::7]:4711";proto=https`)
	if st, _ := svc.Peek(t.Context(), "anon", "ip:2001:db8::7"); st.Remaining != 4 {
		t.Errorf("trusted peer: ip:2001:db8::7 has %d left, want 4", st.Remaining)
	}
	if _, xff := up.last(); xff != "127.0.0.1" {
		t.Errorf("upstream got X-Forwarded-For %q, want the gateway's peer 127.0.0.1", xff)
	}

	gs, up, svc = setup(t, gateway.Config{AnonymousPolicy: "anon"}, map[string]int64{"anon": 5})
	send(gs, "for=203.0.113.50")
	if st, _ := svc.Peek(t.Context(), "anon", "ip:127.0.0.1"); st.Remaining != 4 {
		t.Errorf("untrusted peer: ip:127.0.0.1 has %d left, want 4 (the header ignored)", st.Remaining)
	}
	if fwd := up.fwd[len(up.fwd)-1]; fwd != "" {
		t.Errorf("upstream got Forwarded %q from an untrusted client, want it dropped", fwd)
	}
}

// TestRefusalHeadersReportWhatRemains: two policies, 3 a minute and 1,000
// a day; the fourth request is refused by the minute and charges nothing,
// so the day's r is what remains of it, 997, as its state says.
func TestRefusalHeadersReportWhatRemains(t *testing.T) {
	t.Parallel()
	cfg := gateway.Config{Routes: []gateway.Route{{Path: "/", Policies: []string{"tiny", "daily"}}}}
	gs, _, svc := setup(t, cfg, nil)
	for _, p := range []limits.NamedPolicy{
		{Name: "tiny", Algorithm: ratelimit.TokenBucket, Limit: 3, Period: limits.Period(time.Minute)},
		{Name: "daily", Algorithm: ratelimit.TokenBucket, Limit: 1000, Period: limits.Period(24 * time.Hour)},
	} {
		if _, err := svc.PutPolicy(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	var resp *http.Response
	for range 4 {
		resp = do(t, gs, req{path: "/a"})
	}
	if want := `"tiny";r=0;t=60, "daily";r=997;t=260`; resp.StatusCode != 429 || resp.Header.Get("RateLimit") != want {
		t.Errorf("4th request = %d RateLimit %q, want 429 %q", resp.StatusCode, resp.Header.Get("RateLimit"), want)
	}
	st, err := svc.Peek(t.Context(), "daily", "ip:127.0.0.1")
	if err != nil || st.Remaining != 997 {
		t.Errorf("the daily key's state = %+v, %v; want 997 remaining", st, err)
	}
}

// openRules opens a migrated SQLite store in a temporary directory and the
// rate limit rules on it.
func openRules(t *testing.T) (*store.DB, *limits.Rules) {
	t.Helper()
	db, err := store.Open(t.Context(), store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	rules, err := limits.NewRules(limits.RulesOptions{Store: db})
	if err != nil {
		t.Fatal(err)
	}
	return db, rules
}
