package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/gateway"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// llm is an upstream that reports the tokens each request used, as
// OpenAI-compatible APIs do: in a header, in a JSON body, or in the last
// event of a server-sent event stream. The cost is the query's tokens.
type llm struct {
	served  atomic.Int64 // tokens of the requests that reached it
	slow    chan struct{}
	arrived chan struct{} // a /slow request reached the upstream
}

func (u *llm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.ParseInt(r.URL.Query().Get("tokens"), 10, 64)
	switch r.URL.Path {
	case "/header":
		u.served.Add(n)
		w.Header().Set("X-Usage-Tokens", strconv.FormatInt(n, 10))
		_, _ = io.WriteString(w, "ok")
	case "/json":
		u.served.Add(n)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","choices":[{"text":"hi"}],"usage":{"prompt_tokens":1,"total_tokens":%d}}`, n)
	case "/sse":
		u.served.Add(n)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":\"t%d\"}]}\n\n", i)
			f.Flush()
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", n)
	case "/login":
		b, _ := io.ReadAll(r.Body)
		if string(b) != `{"password":"right"}` {
			w.WriteHeader(http.StatusUnauthorized)
		}
	case "/slow":
		u.arrived <- struct{}{}
		<-u.slow
	case "/nocost": // an upstream error without usage
		w.WriteHeader(http.StatusBadGateway)
	}
}

// setupUsage runs a gateway in front of an llm upstream on a clock the
// test moves.
func setupUsage(t *testing.T, cfg gateway.Config, policies ...limits.NamedPolicy) (*httptest.Server, *llm, *ratelimittest.Clock) {
	t.Helper()
	up := &llm{slow: make(chan struct{}), arrived: make(chan struct{}, 1)}
	gs, clock := setupUpstream(t, cfg, up, policies...)
	return gs, up, clock
}

// setupUpstream runs a gateway in front of upstream, on a real listener,
// on a clock the test moves.
func setupUpstream(t *testing.T, cfg gateway.Config, upstream http.Handler, policies ...limits.NamedPolicy) (*httptest.Server, *ratelimittest.Clock) {
	t.Helper()
	return setupUpstreamOpts(t, cfg, upstream, func(*gateway.Options) {}, policies...)
}

// setupUpstreamOpts is setupUpstream with the gateway's options changed
// by edit.
func setupUpstreamOpts(t *testing.T, cfg gateway.Config, upstream http.Handler, edit func(*gateway.Options), policies ...limits.NamedPolicy) (*httptest.Server, *ratelimittest.Clock) {
	t.Helper()
	us := httptest.NewServer(upstream)
	t.Cleanup(us.Close)
	_, rules := openRules(t)
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
	svc, err := limits.NewService(limits.Options{Rules: rules, Now: clock.Now,
		Counters: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now})})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range policies {
		if _, err := svc.PutPolicy(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Upstream = us.URL
	return serveGateway(t, gateway.Options{Config: cfg, Limits: svc}, edit), clock
}

// A per-minute token budget charged from the response holds to within
// one request's cost, for a header, a JSON body and a streamed response,
// and the refusal says when the debt is repaid.
func TestTokenBudgetFromResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		cost gateway.CostFromResponse
		alg  ratelimit.Algorithm
	}{
		{"/header", gateway.CostFromResponse{Header: "X-Usage-Tokens"}, ratelimit.TokenBucket},
		{"/json", gateway.CostFromResponse{JSON: "usage.total_tokens", Estimate: 100}, ratelimit.FixedWindow},
		{"/sse", gateway.CostFromResponse{JSON: "usage.total_tokens"}, ratelimit.GCRA},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			cfg := gateway.Config{
				AnonymousPolicy: "rpm",
				Routes:          []gateway.Route{{Path: "/", Policies: []string{"tier", "tpm"}, CostFromResponse: &tt.cost}},
			}
			cfg.Routes[0].CostFromResponse.Policies = []string{"tpm"}
			gs, up, clock := setupUsage(t, cfg,
				limits.NamedPolicy{Name: "rpm", Algorithm: ratelimit.FixedWindow, Limit: 1000, Period: limits.Period(time.Minute)},
				limits.NamedPolicy{Name: "tpm", Algorithm: tt.alg, Limit: 1000, Period: limits.Period(time.Minute)})
			const maxCost = 250
			var refused *http.Response
			for i := 0; i < 50 && refused == nil; i++ {
				resp := do(t, gs, req{path: tt.path + "?tokens=" + strconv.Itoa(150+(i*37)%101)})
				_, _ = io.ReadAll(resp.Body)
				switch resp.StatusCode {
				case 200:
				case 429:
					refused = resp
				default:
					t.Fatalf("request %d = %d", i, resp.StatusCode)
				}
			}
			served := up.served.Load()
			if refused == nil || served <= 1000-maxCost || served >= 1000+maxCost {
				t.Fatalf("served %d tokens before a refusal (refused: %v), want 1000 within one request's cost (%d)", served, refused != nil, maxCost)
			}
			retry, _ := strconv.Atoi(refused.Header.Get("Retry-After"))
			// The tokens charged past the budget are paid back at 1000/min
			// (60 ms each) by the buckets; the window waits for its end.
			want := 60
			if tt.alg != ratelimit.FixedWindow && served > 1000 {
				want = int((time.Duration(served-1000+1)*60*time.Millisecond + time.Second - 1) / time.Second)
			}
			if retry != want {
				t.Errorf("Retry-After = %d s, want %d (when %d tokens of debt are repaid)", retry, want, served-1000)
			}
			if r2 := do(t, gs, req{path: tt.path + "?tokens=1"}); r2.StatusCode != 429 {
				t.Errorf("request while in debt = %d, want 429", r2.StatusCode)
			} else {
				var p struct {
					RetryAfterMS int64    `json:"retry_after_ms"`
					Violated     []string `json:"violated-policies"`
				}
				if err := json.NewDecoder(r2.Body).Decode(&p); err != nil || p.RetryAfterMS <= 0 || len(p.Violated) != 1 || p.Violated[0] != "tpm" {
					t.Errorf("problem = %+v, %v; want retry_after_ms and violated tpm", p, err)
				}
			}
			clock.Advance(time.Duration(want) * time.Second)
			if r3 := do(t, gs, req{path: tt.path + "?tokens=1"}); r3.StatusCode != 200 {
				t.Errorf("request after Retry-After = %d, want 200", r3.StatusCode)
			}
		})
	}
}

// Failed-login counting: only 401 responses count, so a client's
// successful logins are never refused, and after 3 failures every login
// is refused until the window ends.
func TestCountStatusesOnLogin(t *testing.T) {
	t.Parallel()
	cfg := gateway.Config{
		AnonymousPolicy: "unused",
		Routes:          []gateway.Route{{Path: "/login", Policies: []string{"failed_logins"}, CountStatuses: []int{401, 403}}},
	}
	gs, _, clock := setupUsage(t, cfg,
		limits.NamedPolicy{Name: "failed_logins", Algorithm: ratelimit.FixedWindow, Limit: 3, Period: limits.Period(time.Hour)})
	login := func(password string) int {
		resp := do(t, gs, req{method: "POST", path: "/login", body: `{"password":"` + password + `"}`})
		return resp.StatusCode
	}
	for i := range 20 {
		if got := login("right"); got != 200 {
			t.Fatalf("successful login %d = %d, want 200", i, got)
		}
	}
	for i := range 3 {
		if got := login("wrong"); got != 401 {
			t.Fatalf("failed login %d = %d, want 401 (let through)", i, got)
		}
	}
	if got := login("right"); got != 429 {
		t.Errorf("login after 3 failures = %d, want 429", got)
	}
	clock.Advance(time.Hour)
	if got := login("right"); got != 200 {
		t.Errorf("login in the next window = %d, want 200", got)
	}
}

// A concurrency policy's lease is released when the response ends, not
// one period later.
func TestConcurrencyLeaseReleasedAtResponseEnd(t *testing.T) {
	t.Parallel()
	cfg := gateway.Config{AnonymousPolicy: "inflight"}
	gs, up, _ := setupUsage(t, cfg,
		limits.NamedPolicy{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: 1, Period: limits.Period(time.Hour)})
	done := make(chan int)
	go func() {
		resp, err := http.Get(gs.URL + "/slow")
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	// Once the slow request reached the upstream, it holds the slot.
	select {
	case <-up.arrived:
	case code := <-done:
		t.Fatalf("slow request = %d before reaching the upstream", code)
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached the upstream")
	}
	if resp := do(t, gs, req{path: "/header"}); resp.StatusCode != 429 {
		t.Fatalf("request while the slow one holds the slot = %d, want 429", resp.StatusCode)
	}
	close(up.slow)
	if got := <-done; got != 200 {
		t.Fatalf("slow request = %d", got)
	}
	if resp := do(t, gs, req{path: "/header"}); resp.StatusCode != 200 {
		t.Errorf("request after the slow one ended = %d, want 200 (lease released)", resp.StatusCode)
	}
}

// A response that does not say what it cost keeps the estimate.
func TestMissingCostKeepsTheEstimate(t *testing.T) {
	t.Parallel()
	cfg := gateway.Config{
		AnonymousPolicy: "tpm",
		Routes: []gateway.Route{{Path: "/", Policies: []string{"tier"},
			CostFromResponse: &gateway.CostFromResponse{Header: "X-Usage-Tokens", Estimate: 300}}},
	}
	gs, _, _ := setupUsage(t, cfg,
		limits.NamedPolicy{Name: "tpm", Algorithm: ratelimit.FixedWindow, Limit: 1000, Period: limits.Period(time.Minute)})
	for i := range 3 {
		if resp := do(t, gs, req{path: "/nocost"}); resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("request %d = %d, want the upstream's 502", i, resp.StatusCode)
		}
	}
	resp := do(t, gs, req{path: "/nocost"})
	if resp.StatusCode != 429 || resp.Header.Get("X-RateLimit-Remaining") != "100" {
		t.Errorf("fourth request = %d remaining %q, want 429 with 100 left (three estimates of 300 kept)",
			resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
}
