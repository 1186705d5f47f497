package httpapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestHoldsFillTheirCaps: through a real listener, one API key takes
// unsettled reservations until each cap: 100 on one key
// (ratelimit.max_holds), 600 over its keys (ratelimit.max_holds_per_api_key);
// another key then fills the node's memory store to its 1,000
// (ratelimit.max_holds_per_node). Each refusal is 429 problem+json whose
// detail names the settings, and takes nothing. A reservation held
// costs under 2 KiB of live memory (the measured figure is in the test's
// log, and in docs/security.md, "Bounds").
func TestHoldsFillTheirCaps(t *testing.T) {
	// Not parallel: the memory measured is this test's alone.
	const perKey, perAPIKey, perNode = 100, 600, 1000
	b := setup(t)
	svc, err := limits.NewService(limits.Options{Rules: loadedRules(t, b),
		Counters: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{MaxHolds: perNode}), MaxHolds: perKey, MaxOwnerHolds: perAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Ratelimit: svc})
	admin := b.addKey(t, auth.ScopeAdmin)
	if resp := b.do(call{method: "PUT", path: "/v1/ratelimit/policies/big", key: admin,
		body: `{"algorithm":"token_bucket","limit":1000000,"period":"1m"}`}); resp.StatusCode != 201 {
		t.Fatalf("PUT policy = %d", resp.StatusCode)
	}
	keyA, keyB := b.addKey(t, auth.ScopeRatelimitCheck), b.addKey(t, auth.ScopeRatelimitCheck)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	reserve := func(key, k string) (int, string) {
		t.Helper()
		code, _, body := wire(t, "POST", ts.URL+"/v1/ratelimit/check", key, `{"policy":"big","key":"`+k+`","reserve":true}`, nil)
		if code == http.StatusOK {
			var a struct{ Allowed bool }
			if json.Unmarshal(body, &a) != nil || !a.Allowed {
				t.Fatalf("reservation on %s: %s", k, body)
			}
		}
		return code, string(body)
	}
	refused := func(what, setting string, code int, body string) {
		t.Helper()
		if code != http.StatusTooManyRequests || !strings.Contains(body, setting) || !strings.Contains(body, `"status":429`) {
			t.Errorf("%s: %d %s; want 429 problem+json naming %s", what, code, body, setting)
		}
	}

	before := liveBytes()
	for i := range perAPIKey {
		if code, body := reserve(keyA, fmt.Sprintf("k%d", i/perKey)); code != http.StatusOK {
			t.Fatalf("key A's reservation %d: %d %s", i, code, body)
		}
	}
	code, body := reserve(keyA, "k0")
	refused("a 101st on one key", "ratelimit.max_holds", code, body)
	code, body = reserve(keyA, "another")
	refused("key A's 601st", "ratelimit.max_holds_per_api_key", code, body)
	for i := range perNode - perAPIKey {
		if code, body := reserve(keyB, fmt.Sprintf("b%d", i/perKey)); code != http.StatusOK {
			t.Fatalf("key B's reservation %d: %d %s", i, code, body)
		}
	}
	per := perEntry(t, "an unsettled reservation over HTTP", before, liveBytes(), perNode)
	if per > 2048 {
		t.Errorf("a reservation holds %.0f bytes, past the documented bound's margin of 2 KiB", per)
	}
	code, body = reserve(keyB, "b-new")
	refused("a reservation past the node's", "ratelimit.max_holds_per_node", code, body)
	if d, err := svc.Peek(t.Context(), "big", "b-new"); err != nil || d.Remaining != d.Limit {
		t.Errorf("the refused reservation took something: %+v, %v", d, err)
	}
}
