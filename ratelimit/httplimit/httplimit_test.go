package httplimit_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

func TestAPIKeyAndIdentityKey(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.9:1"
	var id httplimit.Identifier
	if k := id.Identify(r).Key(); k != "ip:203.0.113.9" {
		t.Errorf("anonymous Key = %q, want ip:203.0.113.9", k)
	}
	r.Header.Set("X-API-Key", "secret")
	if got := id.Identify(r); got.APIKey != "secret" || got.Key() != "key:"+httplimit.HashKey("secret") || strings.Contains(got.Key(), "secret") {
		t.Errorf("Identify with X-API-Key = %+v (key %q), want the hashed API key", got, got.Key())
	}
	r.Header.Set("Authorization", "Bearer other")
	if k := httplimit.APIKey(r); k != "other" {
		t.Errorf("APIKey with both headers = %q, want Authorization's", k)
	}
}

func TestAccountFromBodyKeepsTheBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, ct, body string
		max            int64
		want           string
	}{
		{"json", "application/json", `{"username":"ann","password":"x"}`, 0, "ann"},
		{"form", "application/x-www-form-urlencoded", "username=bob&password=x", 0, "bob"},
		{"absent field", "application/json", `{"user":"ann"}`, 0, ""},
		{"number", "application/json", `{"username":42}`, 0, "42"},
		{"not json", "application/json", `username=ann`, 0, httplimit.Unreadable},
		{"too large", "application/json", `{"username":"ann","pad":"` + strings.Repeat("x", 100) + `"}`, 50, httplimit.Unreadable},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/login", strings.NewReader(tt.body))
		r.Header.Set("Content-Type", tt.ct)
		if got := httplimit.AccountFromBody(r, "username", tt.max); got != tt.want {
			t.Errorf("%s: AccountFromBody = %q, want %q", tt.name, got, tt.want)
		}
		if rest, _ := io.ReadAll(r.Body); string(rest) != tt.body {
			t.Errorf("%s: body after AccountFromBody = %q, want it whole", tt.name, rest)
		}
	}
}

type refusal struct {
	Type     string   `json:"type"`
	Status   int      `json:"status"`
	Violated []string `json:"violated-policies"`
}

func TestMiddlewareQuotaVersusCapacity(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock(time.Unix(3600, 0)) // at the start of an hour
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now})
	quota := &ratelimit.Policy{Name: "free", Algorithm: ratelimit.TokenBucket, Limit: 2, Period: 2 * time.Second}
	capacity := &ratelimit.Policy{Name: "global", Algorithm: ratelimit.FixedWindow, Limit: 3, Period: time.Hour}
	id := &httplimit.Identifier{}
	m := &httplimit.Middleware{
		Store: store,
		Limits: func(r *http.Request) []httplimit.Limit {
			return []httplimit.Limit{{Policy: quota, Key: id.Identify(r).Key()}}
		},
		Global: func(*http.Request) []httplimit.Limit { return []httplimit.Limit{{Policy: capacity, Key: "all"}} },
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	serve := func(ip string) *http.Response {
		r := httptest.NewRequest("GET", "/x", nil)
		r.RemoteAddr = ip + ":1"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec.Result()
	}
	tests := []struct {
		ip          string
		status      int
		violated    string
		retry       string
		rateLimit   string
		xRemaining  string
		problemSlug string
	}{
		{"192.0.2.1", 204, "", "", `"free";r=1;t=1, "global";r=2;t=3600`, "1", ""},
		{"192.0.2.1", 204, "", "", `"free";r=0;t=2, "global";r=1;t=3600`, "0", ""},
		// The global check passed but was not charged: its r is what
		// remains, as nothing was taken from it.
		{"192.0.2.1", 429, "free", "1", `"free";r=0;t=2, "global";r=1;t=3600`, "0", "quota-exceeded"},
		{"192.0.2.2", 204, "", "", `"free";r=1;t=1, "global";r=0;t=3600`, "0", ""},
		// And the other way round: the client's own quota, untouched.
		{"192.0.2.3", 503, "global", "3600", `"free";r=2;t=0, "global";r=0;t=3600`, "0", "temporary-reduced-capacity"},
	}
	for i, tt := range tests {
		resp := serve(tt.ip)
		if resp.StatusCode != tt.status || resp.Header.Get("Retry-After") != tt.retry ||
			resp.Header.Get("RateLimit") != tt.rateLimit || resp.Header.Get("X-RateLimit-Remaining") != tt.xRemaining {
			t.Errorf("request %d from %s = %d Retry-After %q RateLimit %q X-RateLimit-Remaining %q; want %d %q %q %q", i+1, tt.ip,
				resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"), resp.Header.Get("X-RateLimit-Remaining"),
				tt.status, tt.retry, tt.rateLimit, tt.xRemaining)
		}
		if resp.Header.Get("RateLimit-Policy") != `"free";q=2;w=2, "global";q=3;w=3600` {
			t.Errorf("request %d: RateLimit-Policy = %q", i+1, resp.Header.Get("RateLimit-Policy"))
		}
		if tt.problemSlug == "" {
			continue
		}
		var p refusal
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("request %d: refusal body: %v (%s)", i+1, err, resp.Header.Get("Content-Type"))
		}
		if !strings.HasSuffix(p.Type, "/"+tt.problemSlug) || p.Status != tt.status || len(p.Violated) != 1 || p.Violated[0] != tt.violated {
			t.Errorf("request %d: refusal %+v, want type .../%s listing %s", i+1, p, tt.problemSlug, tt.violated)
		}
	}
}

func TestMiddlewareWaitsOnlyForCapacity(t *testing.T) {
	t.Parallel()
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
	quota := &ratelimit.Policy{Name: "q", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: time.Hour}
	capacity := &ratelimit.Policy{Name: "cap", Algorithm: ratelimit.TokenBucket, Limit: 50, Period: time.Second, Burst: 1}
	m := &httplimit.Middleware{
		Store:   store,
		MaxWait: 2 * time.Second,
		Limits: func(r *http.Request) []httplimit.Limit {
			return []httplimit.Limit{{Policy: quota, Key: r.URL.Query().Get("c")}}
		},
		Global: func(*http.Request) []httplimit.Limit { return []httplimit.Limit{{Policy: capacity, Key: "all"}} },
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	status := func(c string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/?c="+c, nil))
		return rec.Code
	}
	if s := status("a"); s != 200 {
		t.Fatalf("first request = %d", s)
	}
	// Capacity is out for 20ms: b waits for it rather than getting 503.
	start := time.Now()
	if s := status("b"); s != 200 {
		t.Errorf("request refused only by capacity = %d, want 200 after a bounded wait", s)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("waited %v, want about 20ms", took)
	}
	// a is over its own quota: 429 at once, no waiting.
	if s := status("a"); s != 429 {
		t.Errorf("client over quota = %d, want 429", s)
	}
}

// TestRefusalHeadersReportWhatRemains: 3 a minute and 1,000 a day; the
// fourth request is refused by the minute and charges nothing, so the
// day's r is what remains of it, 997, as the key's state says.
func TestRefusalHeadersReportWhatRemains(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock(time.Unix(86400, 0))
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now})
	tiny := &ratelimit.Policy{Name: "tiny", Algorithm: ratelimit.TokenBucket, Limit: 3, Period: time.Minute}
	daily := &ratelimit.Policy{Name: "daily", Algorithm: ratelimit.TokenBucket, Limit: 1000, Period: 24 * time.Hour}
	m := &httplimit.Middleware{Store: store, Limits: func(*http.Request) []httplimit.Limit {
		return []httplimit.Limit{{Policy: tiny, Key: "k"}, {Policy: daily, Key: "k"}}
	}}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	var rec *httptest.ResponseRecorder
	for range 4 {
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	}
	if want := `"tiny";r=0;t=60, "daily";r=997;t=260`; rec.Code != 429 || rec.Header().Get("RateLimit") != want {
		t.Errorf("4th request = %d RateLimit %q, want 429 %q", rec.Code, rec.Header().Get("RateLimit"), want)
	}
	if d, err := store.Peek(t.Context(), daily, "k"); err != nil || d.Remaining != 997 {
		t.Errorf("the daily key's state = %+v, %v; want 997 remaining", d, err)
	}
}
