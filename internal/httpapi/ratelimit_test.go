package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// loadedRules is the rate limit rules of b's store, loaded.
func loadedRules(t testing.TB, b *bundle) *limits.Rules {
	t.Helper()
	rules, err := limits.NewRules(limits.RulesOptions{Store: b.db})
	if err != nil {
		t.Fatal(err)
	}
	if err := rules.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	return rules
}

// setupRL is setup with the rate limit routes on a memory counter store.
func setupRL(t testing.TB) *bundle {
	t.Helper()
	b := setup(t)
	rules := loadedRules(t, b)
	// A frozen clock: decisions' times (retry_after_ms, reset_after_ms) are
	// asserted exactly, which a clock moving between two checks would break.
	frozen := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	counters := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: func() time.Time { return frozen }})
	svc, err := limits.NewService(limits.Options{Rules: rules, Counters: counters})
	if err != nil {
		t.Fatal(err)
	}
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Ratelimit: svc})
	return b
}

func decode[T any](t *testing.T, resp *http.Response) T {
	t.Helper()
	var v T
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("decode %T: %v", v, err)
	}
	return v
}

func TestCheckSingleAndHeaders(t *testing.T) {
	t.Parallel()
	b := setupRL(t)
	resp := b.do(call{method: "POST", path: "/v1/ratelimit/check", body: `{"policy":"free","key":"api_key:abc","cost":1}`})
	if resp.StatusCode != 200 {
		t.Fatalf("check = %d, want 200", resp.StatusCode)
	}
	got := decode[map[string]any](t, resp)
	want := map[string]any{"allowed": true, "limit": 60.0, "remaining": 59.0, "retry_after_ms": 0.0, "reset_after_ms": 1000.0, "decided_by": "rule"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("check body %s = %v, want %v (body %v)", k, got[k], v, got)
		}
	}
	headers := map[string]string{
		"RateLimit-Policy": `"free";q=60;w=60`, "RateLimit": `"free";r=59;t=1`,
		"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "59", "X-RateLimit-Reset": "1",
	}
	for k, v := range headers {
		if resp.Header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, resp.Header.Get(k), v)
		}
	}
	// Exhaust it: a refusal is still 200, with allowed false.
	b.do(call{method: "POST", path: "/v1/ratelimit/check", body: `{"policy":"free","key":"k","cost":60}`})
	resp = b.do(call{method: "POST", path: "/v1/ratelimit/check", body: `{"policy":"free","key":"k"}`})
	got = decode[map[string]any](t, resp)
	if resp.StatusCode != 200 || got["allowed"] != false || got["retry_after_ms"] != 1000.0 || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("over-limit check = %d %v Retry-After %q; want 200, allowed false, retry_after_ms 1000, Retry-After 1",
			resp.StatusCode, got, resp.Header.Get("Retry-After"))
	}
}

func TestCheckMulti(t *testing.T) {
	t.Parallel()
	b := setupRL(t)
	body := `{"checks":[{"policy":"free","key":"203.0.113.9"},{"policy":"paid","key":"ann","cost":600}]}`
	resp := b.do(call{method: "POST", path: "/v1/ratelimit/check", body: body})
	got := decode[checkResponse](t, resp)
	if !got.Allowed || len(got.Results) != 2 || got.Results[1].Remaining != 0 || got.Remaining != 0 {
		t.Fatalf("multi check = %+v, want allowed, two results, the paid one empty", got)
	}
	if p := resp.Header.Get("RateLimit-Policy"); p != `"free";q=60;w=60, "paid";q=600;w=60` {
		t.Errorf("RateLimit-Policy = %q, want one member per policy", p)
	}
	resp = b.do(call{method: "POST", path: "/v1/ratelimit/check", body: body})
	got = decode[checkResponse](t, resp)
	if got.Allowed || !got.Results[0].Allowed || got.Results[1].Allowed {
		t.Errorf("second multi check = %+v, want refused by the paid check alone", got)
	}
}

func TestRatelimitBadInput(t *testing.T) {
	t.Parallel()
	b := setupRL(t)
	long := strings.Repeat("x", 1025)
	tests := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"unknown policy", "POST", "/v1/ratelimit/check", `{"policy":"nope","key":"k"}`, 404, ""},
		{"key over 1 KiB", "POST", "/v1/ratelimit/check", `{"policy":"free","key":"` + long + `"}`, 400, "key"},
		{"cost 0", "POST", "/v1/ratelimit/check", `{"policy":"free","key":"k","cost":0}`, 400, "cost"},
		{"negative cost", "POST", "/v1/ratelimit/check", `{"policy":"free","key":"k","cost":-1}`, 400, "cost"},
		{"both forms", "POST", "/v1/ratelimit/check", `{"policy":"free","key":"k","checks":[]}`, 400, ""},
		{"unknown field", "POST", "/v1/ratelimit/check", `{"policy":"free","key":"k","costs":1}`, 400, "costs"},
		{"invalid policy", "PUT", "/v1/ratelimit/policies/x", `{"algorithm":"leaky","limit":0,"period":"soon"}`, 422, "algorithm"},
		{"policy name mismatch", "PUT", "/v1/ratelimit/policies/x", `{"name":"y","algorithm":"gcra","limit":1,"period":"1s"}`, 422, "name"},
		{"unknown policy get", "GET", "/v1/ratelimit/policies/nope", "", 404, ""},
		{"unknown policy delete", "DELETE", "/v1/ratelimit/policies/nope", "", 404, ""},
		{"block without duration", "POST", "/v1/ratelimit/blocks", `{"key":"k"}`, 422, "duration"},
		{"block too long", "POST", "/v1/ratelimit/blocks", `{"key":"k","duration":"400d"}`, 422, "duration"},
		{"simulate without policy", "POST", "/v1/ratelimit/simulate", `{"requests":[]}`, 422, "policy"},
		{"simulate bad inline policy", "POST", "/v1/ratelimit/simulate", `{"policy":{"algorithm":"gcra","limit":-1,"period":"1s"},"requests":[]}`, 422, "policy.limit"},
		{"simulate unknown policy", "POST", "/v1/ratelimit/simulate", `{"policy_name":"nope","requests":[]}`, 404, ""},
		{"simulate bad cost", "POST", "/v1/ratelimit/simulate", `{"policy_name":"free","requests":[{"at_ms":0,"key":"k","cost":0}]}`, 400, "requests[0].cost"},
		{"unknown key policy", "GET", "/v1/ratelimit/keys/nope/k", "", 404, ""},
		{"unblock unblocked", "DELETE", "/v1/ratelimit/blocks/k", "", 404, ""},
		{"domain without an entry key", "POST", "/v1/ratelimit/blocks", `{"key":"203.0.113.9","domain":"edge","duration":"1m"}`, 422, "domain"},
		{"domain with an empty entry value", "POST", "/v1/ratelimit/blocks", `{"key":"remote_address=","domain":"edge","duration":"1m"}`, 422, "domain"},
		{"domain with a policy", "POST", "/v1/ratelimit/blocks", `{"key":"remote_address=203.0.113.9","domain":"edge","policy":"free","duration":"1m"}`, 422, "policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.do(call{method: tt.method, path: tt.path, body: tt.body})
			if resp.StatusCode != tt.status {
				t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.status)
			}
			p := decodeProblem(t, resp)
			named := false
			for _, f := range p.Errors {
				named = named || f.Field == tt.field
			}
			if tt.field != "" && !named {
				t.Errorf("problem errors = %+v, want one naming %q", p.Errors, tt.field)
			}
		})
	}
	if resp := b.do(call{method: "GET", path: "/v1/ratelimit/keys/free/k"}); decode[map[string]any](t, resp)["remaining"] != 60.0 {
		t.Error("refused requests charged the key")
	}
}

func TestPoliciesCRUD(t *testing.T) {
	t.Parallel()
	b := setupRL(t)
	body := `{"algorithm":"sliding_window_log","limit":5,"period":"1m","mode":"soft","burst_over":2,"on_store_failure":"closed"}`
	resp := b.do(call{method: "PUT", path: "/v1/ratelimit/policies/login_ip", body: body})
	if resp.StatusCode != 201 {
		t.Fatalf("PUT new policy = %d, want 201", resp.StatusCode)
	}
	if resp := b.do(call{method: "PUT", path: "/v1/ratelimit/policies/login_ip", body: body}); resp.StatusCode != 200 {
		t.Errorf("PUT existing policy = %d, want 200", resp.StatusCode)
	}
	got := decode[policyBody](t, b.do(call{method: "GET", path: "/v1/ratelimit/policies/login_ip"}))
	want := policyBody{Name: "login_ip", Algorithm: "sliding_window_log", Limit: 5, Period: "1m", Mode: "soft", BurstOver: 2, OnStoreFailure: "closed", Source: "database"}
	if got != want {
		t.Errorf("GET policy = %+v, want %+v", got, want)
	}
	list := decode[struct{ Items []policyBody }](t, b.do(call{method: "GET", path: "/v1/ratelimit/policies"}))
	if len(list.Items) != 4 || list.Items[0].Name != "enterprise" {
		t.Errorf("policies = %+v, want 4 by name", list.Items)
	}
	if resp := b.do(call{method: "DELETE", path: "/v1/ratelimit/policies/login_ip"}); resp.StatusCode != 204 {
		t.Errorf("DELETE = %d, want 204", resp.StatusCode)
	}
	if resp := b.do(call{method: "GET", path: "/v1/ratelimit/policies/login_ip"}); resp.StatusCode != 404 {
		t.Errorf("GET deleted = %d, want 404", resp.StatusCode)
	}
}

// A policy's sync mode and interval go through the API and back; an
// interval without sync local is a 422 naming it.
func TestPolicySyncFields(t *testing.T) {
	t.Parallel()
	b := setupRL(t)
	body := `{"algorithm":"token_bucket","limit":1000,"period":"1s","sync":"local","sync_interval":"20ms"}`
	if resp := b.do(call{method: "PUT", path: "/v1/ratelimit/policies/edge", body: body}); resp.StatusCode != 201 {
		t.Fatalf("PUT sync local policy = %d, want 201", resp.StatusCode)
	}
	got := decode[policyBody](t, b.do(call{method: "GET", path: "/v1/ratelimit/policies/edge"}))
	if got.Sync != "local" || got.SyncInterval != "20ms" {
		t.Errorf("GET policy = %+v, want sync local every 20ms", got)
	}
	b.do(call{method: "PUT", path: "/v1/ratelimit/policies/edge2", body: `{"algorithm":"gcra","limit":10,"period":"1s","sync":"local"}`})
	if got := decode[policyBody](t, b.do(call{method: "GET", path: "/v1/ratelimit/policies/edge2"})); got.SyncInterval != "50ms" {
		t.Errorf("GET policy without sync_interval = %+v, want the default 50ms", got)
	}
	resp := b.do(call{method: "PUT", path: "/v1/ratelimit/policies/bad", body: `{"algorithm":"token_bucket","limit":10,"period":"1s","sync_interval":"1s"}`})
	if resp.StatusCode != 422 {
		t.Errorf("PUT sync_interval without sync local = %d, want 422", resp.StatusCode)
	}
}

func TestSimulateEndpoint(t *testing.T) {
	t.Parallel()
	b := setupRL(t)
	body := `{"policy":{"algorithm":"fixed_window","limit":2,"period":"10s"},"requests":[
		{"at_ms":0,"key":"u1"},{"at_ms":9900,"key":"u1"},{"at_ms":9950,"key":"u1"},{"at_ms":10000,"key":"u1","cost":2}]}`
	got := decode[simulateResponse](t, b.do(call{method: "POST", path: "/v1/ratelimit/simulate", body: body}))
	allowed := []bool{true, true, false, true}
	if got.Allowed != 3 || got.Refused != 1 || len(got.Decisions) != 4 {
		t.Fatalf("simulate = %+v, want 3 allowed, 1 refused", got)
	}
	for i, d := range got.Decisions {
		if d.Allowed != allowed[i] {
			t.Errorf("decision %d = %+v, want allowed %v", i, d, allowed[i])
		}
	}
	if got.Decisions[2].RetryAfterMS != 50 {
		t.Errorf("refused decision retry_after_ms = %d, want 50 (the next window at 10s)", got.Decisions[2].RetryAfterMS)
	}
	named := decode[simulateResponse](t, b.do(call{method: "POST", path: "/v1/ratelimit/simulate",
		body: `{"policy_name":"free","requests":[{"at_ms":0,"key":"a","cost":60},{"at_ms":500,"key":"a"}]}`}))
	if named.Allowed != 1 || named.Refused != 1 || named.Decisions[1].RetryAfterMS != 500 {
		t.Errorf("simulate free = %+v, want the second refused, retry after 500ms", named)
	}
	if resp := b.do(call{method: "GET", path: "/v1/ratelimit/keys/free/a"}); decode[map[string]any](t, resp)["remaining"] != 60.0 {
		t.Error("simulate touched live state")
	}
}

// TestEnvoyBlocks: a block of a descriptor entry in one domain is listed
// with its domain, does not refuse HTTP checks of the same key, and is
// lifted by domain.
func TestEnvoyBlocks(t *testing.T) {
	t.Parallel()
	b := setupRL(t)
	for _, body := range []string{
		`{"key":"remote_address=203.0.113.9","domain":"edge","duration":"15m","reason":"scraper"}`,
		`{"key":"remote_address=203.0.113.9","duration":"5m","reason":"everywhere"}`,
	} {
		if resp := b.do(call{method: "POST", path: "/v1/ratelimit/blocks", body: body}); resp.StatusCode != 201 {
			t.Fatalf("POST block %s = %d, want 201", body, resp.StatusCode)
		}
	}
	list := decode[struct{ Items []map[string]any }](t, b.do(call{method: "GET", path: "/v1/ratelimit/blocks"}))
	if len(list.Items) != 2 || list.Items[0]["domain"] != nil || list.Items[1]["domain"] != "edge" ||
		list.Items[1]["key"] != "remote_address=203.0.113.9" {
		t.Errorf("blocks = %+v, want the one without domain, then the one in edge", list.Items)
	}
	if resp := b.do(call{method: "DELETE", path: "/v1/ratelimit/blocks/remote_address=203.0.113.9?domain="}); resp.StatusCode != 204 {
		t.Errorf("DELETE the block without domain = %d, want 204", resp.StatusCode)
	}
	check := decode[checkResponse](t, b.do(call{method: "POST", path: "/v1/ratelimit/check",
		body: `{"policy":"free","key":"remote_address=203.0.113.9"}`}))
	if !check.Allowed || check.DecidedBy != "rule" {
		t.Errorf("HTTP check of a key blocked in an Envoy domain = %+v, want allowed by the rule", check)
	}
	list = decode[struct{ Items []map[string]any }](t, b.do(call{method: "GET", path: "/v1/ratelimit/blocks"}))
	if len(list.Items) != 1 || list.Items[0]["domain"] != "edge" {
		t.Errorf("blocks after lifting the one without domain = %+v, want the one in edge", list.Items)
	}
}

func TestBlocksAndKeys(t *testing.T) {
	t.Parallel()
	b := setupRL(t)
	resp := b.do(call{method: "POST", path: "/v1/ratelimit/blocks", body: `{"key":"ip:9","duration":"15m","reason":"credential stuffing"}`})
	if resp.StatusCode != 201 {
		t.Fatalf("POST block = %d, want 201", resp.StatusCode)
	}
	list := decode[struct{ Items []blockJSON }](t, b.do(call{method: "GET", path: "/v1/ratelimit/blocks"}))
	if len(list.Items) != 1 || list.Items[0].Reason != "credential stuffing" {
		t.Errorf("blocks = %+v, want the one", list.Items)
	}
	check := decode[checkResponse](t, b.do(call{method: "POST", path: "/v1/ratelimit/check", body: `{"policy":"paid","key":"ip:9"}`}))
	if check.Allowed || check.DecidedBy != "block" || check.RetryAfterMS < 15*60*1000-5000 || check.RetryAfterMS > 15*60*1000 {
		t.Errorf("check of a blocked key = %+v, want refused by the block for 15m", check)
	}
	key := decode[keyStateJSON](t, b.do(call{method: "GET", path: "/v1/ratelimit/keys/free/ip:9"}))
	if !key.Blocked || key.DecidedBy != "block" || key.Block == nil || key.Remaining != 60 {
		t.Errorf("key state = %+v, want blocked, decided by the block, nothing consumed", key)
	}
	if resp := b.do(call{method: "DELETE", path: "/v1/ratelimit/blocks/ip:9"}); resp.StatusCode != 204 {
		t.Errorf("DELETE block = %d, want 204", resp.StatusCode)
	}
	b.do(call{method: "POST", path: "/v1/ratelimit/check", body: `{"policy":"free","key":"ip:9","cost":10}`})
	key = decode[keyStateJSON](t, b.do(call{method: "GET", path: "/v1/ratelimit/keys/free/ip:9"}))
	if key.Blocked || key.DecidedBy != "rule" || key.Remaining != 50 {
		t.Errorf("key state after unblock and a check = %+v, want 50 left by the rule", key)
	}
	if resp := b.do(call{method: "DELETE", path: "/v1/ratelimit/keys/free/ip:9"}); resp.StatusCode != 204 {
		t.Errorf("DELETE key = %d, want 204", resp.StatusCode)
	}
	if key = decode[keyStateJSON](t, b.do(call{method: "GET", path: "/v1/ratelimit/keys/free/ip:9"})); key.Remaining != 60 {
		t.Errorf("after reset, %d left, want 60", key.Remaining)
	}
}

func TestRatelimitScopes(t *testing.T) {
	t.Parallel()
	b := setupRL(t)
	checker := b.addKey(t, auth.ScopeRatelimitCheck)
	tests := []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/ratelimit/check", `{"policy":"free","key":"k"}`, 200},
		{"GET", "/v1/ratelimit/keys/free/k", "", 200},
		{"GET", "/v1/ratelimit/policies", "", 200},
		{"PUT", "/v1/ratelimit/policies/x", `{"algorithm":"gcra","limit":1,"period":"1s"}`, 403},
		{"DELETE", "/v1/ratelimit/policies/free", "", 403},
		{"POST", "/v1/ratelimit/blocks", `{"key":"k","duration":"1m"}`, 403},
		{"GET", "/v1/ratelimit/blocks", "", 403},
		{"DELETE", "/v1/ratelimit/keys/free/k", "", 403},
	}
	for _, tt := range tests {
		if resp := b.do(call{method: tt.method, path: tt.path, body: tt.body, key: checker}); resp.StatusCode != tt.status {
			t.Errorf("%s %s with a ratelimit:check key = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.status)
		}
	}
}

// TestCheckRefusalReportsWhatRemains: 3 a minute and 1,000 a day; the
// fourth check is refused by the minute and charges nothing, so the day's
// result and RateLimit r are what remains of it, 997, as its key reads.
func TestCheckRefusalReportsWhatRemains(t *testing.T) {
	t.Parallel()
	b := setupRL(t)
	for name, body := range map[string]string{
		"tiny":  `{"algorithm":"token_bucket","limit":3,"period":"1m"}`,
		"daily": `{"algorithm":"token_bucket","limit":1000,"period":"1d"}`,
	} {
		if resp := b.do(call{method: "PUT", path: "/v1/ratelimit/policies/" + name, body: body}); resp.StatusCode != 201 {
			t.Fatalf("PUT %s = %d", name, resp.StatusCode)
		}
	}
	type result struct {
		Policy    string `json:"policy"`
		Allowed   bool   `json:"allowed"`
		Remaining int64  `json:"remaining"`
	}
	type answer struct {
		Allowed bool     `json:"allowed"`
		Results []result `json:"results"`
	}
	var resp *http.Response
	var got answer
	for range 4 {
		resp = b.do(call{method: "POST", path: "/v1/ratelimit/check", body: `{"checks":[{"policy":"tiny","key":"k"},{"policy":"daily","key":"k"}]}`})
		got = decode[answer](t, resp)
	}
	want := []result{{"tiny", false, 0}, {"daily", true, 997}}
	if got.Allowed || len(got.Results) != 2 || got.Results[0] != want[0] || got.Results[1] != want[1] {
		t.Errorf("4th check = %+v, want refused with results %+v", got, want)
	}
	if h, want := resp.Header.Get("RateLimit"), `"tiny";r=0;t=60, "daily";r=997;t=260`; h != want {
		t.Errorf("RateLimit = %q, want %q", h, want)
	}
	key := decode[map[string]any](t, b.do(call{method: "GET", path: "/v1/ratelimit/keys/daily/k"}))
	if key["remaining"] != 997.0 {
		t.Errorf("GET the daily key = %v, want 997 remaining", key)
	}
}
