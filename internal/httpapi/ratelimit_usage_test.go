package httpapi

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// setupUsage is setupRL on a clock the test moves, with a token budget
// (1000 tokens per hour, max debt 500), a request rate (3 per minute), a
// failed-login counter and a concurrency policy.
func setupUsage(t *testing.T) (*bundle, *ratelimittest.Clock) {
	t.Helper()
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
	return setupUsageOn(t, clock, ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now})), clock
}

// setupUsageOn is setupUsage on the given clock and counter store.
func setupUsageOn(t *testing.T, clock *ratelimittest.Clock, counters ratelimit.Store) *bundle {
	t.Helper()
	b := setup(t)
	rules := loadedRules(t, b)
	svc, err := limits.NewService(limits.Options{Rules: rules, Counters: counters, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Ratelimit: svc})
	for name, body := range map[string]string{
		"tpm":    `{"algorithm":"token_bucket","limit":1000,"period":"1h","max_debt":500}`,
		"rpm":    `{"algorithm":"fixed_window","limit":3,"period":"1m"}`,
		"logins": `{"algorithm":"fixed_window","limit":2,"period":"1h"}`,
		"slots":  `{"algorithm":"concurrency","limit":1,"period":"1m"}`,
	} {
		if resp := b.do(call{method: "PUT", path: "/v1/ratelimit/policies/" + name, body: body}); resp.StatusCode != 201 {
			t.Fatalf("PUT %s = %d", name, resp.StatusCode)
		}
	}
	return b
}

type usageAnswer struct {
	Allowed              bool   `json:"allowed"`
	Remaining            int64  `json:"remaining"`
	RetryAfterMS         int64  `json:"retry_after_ms"`
	ReservationID        string `json:"reservation_id"`
	ReservationExpiresAt string `json:"reservation_expires_at"`
	Results              []struct {
		Policy    string `json:"policy"`
		Remaining int64  `json:"remaining"`
	} `json:"results"`
}

func (b *bundle) usage(t *testing.T, body string) usageAnswer {
	t.Helper()
	resp := b.do(call{method: "POST", path: "/v1/ratelimit/check", body: body})
	if resp.StatusCode != 200 {
		t.Fatalf("check %s = %d", body, resp.StatusCode)
	}
	return decode[usageAnswer](t, resp)
}

func (b *bundle) settleCall(t *testing.T, id string, cost int64) (int, map[string]any) {
	t.Helper()
	resp := b.do(call{method: "POST", path: "/v1/ratelimit/settle", body: `{"reservation_id":"` + id + `","cost":` + strconv.FormatInt(cost, 10) + `}`})
	return resp.StatusCode, decode[map[string]any](t, resp)
}

func (b *bundle) remaining(t *testing.T, policy, key string) int64 {
	t.Helper()
	return decode[usageAnswer](t, b.do(call{method: "GET", path: "/v1/ratelimit/keys/" + policy + "/" + key})).Remaining
}

func TestReserveSettleOverHTTP(t *testing.T) {
	t.Parallel()
	b, clock := setupUsage(t)
	// Requests per minute and tokens per hour together: the request is
	// final, the token estimate is replaced on settle.
	a := b.usage(t, `{"reserve":true,"checks":[{"policy":"rpm","key":"k","reserve":false},{"policy":"tpm","key":"k","cost":500}]}`)
	if !a.Allowed || a.ReservationID == "" || len(a.Results) != 2 || a.Results[1].Remaining != 500 {
		t.Fatalf("reserve = %+v, want allowed with a reservation and 500 tokens left", a)
	}
	if exp, err := time.Parse(time.RFC3339Nano, a.ReservationExpiresAt); err != nil || !exp.Equal(ratelimittest.Epoch.Add(5*time.Minute)) {
		t.Errorf("reservation_expires_at = %q, want the default 5 min from now", a.ReservationExpiresAt)
	}
	if code, got := b.settleCall(t, a.ReservationID, 120); code != 200 || got["settled"] != true || got["already_settled"] != false {
		t.Fatalf("settle = %d %v", code, got)
	}
	if r := b.remaining(t, "tpm", "k"); r != 880 {
		t.Errorf("tokens after settling 500 as 120 = %d, want 880", r)
	}
	if r := b.remaining(t, "rpm", "k"); r != 2 {
		t.Errorf("requests after settle = %d, want 2 (final)", r)
	}
	if code, got := b.settleCall(t, a.ReservationID, 900); code != 200 || got["already_settled"] != true {
		t.Errorf("second settle = %d %v, want 200 already_settled", code, got)
	}
	if r := b.remaining(t, "tpm", "k"); r != 880 {
		t.Errorf("tokens after a second settle = %d, want 880 (unchanged)", r)
	}

	// An unsettled reservation keeps its estimate when it expires.
	a = b.usage(t, `{"policy":"tpm","key":"k","cost":300,"reserve":true,"reservation_ttl":"30s"}`)
	clock.Advance(30 * time.Second)
	if code, got := b.settleCall(t, a.ReservationID, 0); code != 404 {
		t.Errorf("settle after reservation_ttl = %d %v, want 404", code, got)
	}
	if r := b.remaining(t, "tpm", "k"); r != 588 {
		t.Errorf("tokens after the reservation expired = %d, want 588 (880 - 300 + 8 refilled)", r)
	}

	// A charge after the fact is never refused, goes into debt (capped at
	// max_debt 500), and then checks are refused until it is repaid.
	a = b.usage(t, `{"policy":"tpm","key":"k","cost":5000,"charge":"after"}`)
	if !a.Allowed || a.Remaining != 0 || a.RetryAfterMS != 1_803_600 {
		t.Errorf("charge 5000 = %+v, want accepted, 0 left, retry after 501 tokens at 3.6 s each (1803.6 s)", a)
	}
	if a := b.usage(t, `{"policy":"tpm","key":"k","cost":1}`); a.Allowed {
		t.Errorf("check while in debt = %+v, want refused", a)
	}
	for _, bad := range []string{`{"reservation_id":"x"}`, `{"reservation_id":"x","cost":-1}`, `{"cost":1}`} {
		if resp := b.do(call{method: "POST", path: "/v1/ratelimit/settle", body: bad}); resp.StatusCode != 400 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("settle %s = %d %s, want a 400 problem", bad, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if resp := b.do(call{method: "POST", path: "/v1/ratelimit/check", body: `{"policy":"tpm","key":"k","charge":"later"}`}); resp.StatusCode != 400 {
		t.Errorf(`"charge":"later" = %d, want 400`, resp.StatusCode)
	}
}

// Failed-login counting: each attempt is checked with "charge":
// "on_settle" and settled with 1 when it failed, 0 when it succeeded, so
// successful logins are never refused and never counted.
func TestOnSettleCountsOnlyFailures(t *testing.T) {
	t.Parallel()
	b, _ := setupUsage(t)
	login := func(failed bool) bool {
		a := b.usage(t, `{"policy":"logins","key":"ann","charge":"on_settle"}`)
		if !a.Allowed {
			return false
		}
		cost := int64(0)
		if failed {
			cost = 1
		}
		if code, _ := b.settleCall(t, a.ReservationID, cost); code != 200 {
			t.Fatalf("settle = %d", code)
		}
		return true
	}
	for i := range 10 {
		if !login(false) {
			t.Fatalf("successful login %d refused", i)
		}
	}
	for i := range 2 {
		if !login(true) {
			t.Fatalf("failed login %d refused, want the first two allowed", i)
		}
	}
	if login(false) {
		t.Error("a login after two failures was allowed, want refused until the window ends")
	}
}

// A concurrency policy over HTTP answers a lease, released by settling it.
func TestConcurrencyLeaseOverHTTP(t *testing.T) {
	t.Parallel()
	b, clock := setupUsage(t)
	a := b.usage(t, `{"policy":"slots","key":"k"}`)
	if !a.Allowed || a.ReservationID == "" {
		t.Fatalf("first lease = %+v, want allowed with a reservation_id", a)
	}
	if a2 := b.usage(t, `{"policy":"slots","key":"k"}`); a2.Allowed {
		t.Fatalf("second lease while the first is held = %+v, want refused", a2)
	}
	if code, _ := b.settleCall(t, a.ReservationID, 0); code != 200 {
		t.Fatalf("release = %d", code)
	}
	a = b.usage(t, `{"policy":"slots","key":"k"}`)
	if !a.Allowed {
		t.Fatalf("lease after release = %+v, want allowed", a)
	}
	clock.Advance(time.Minute) // never released: the lease expires
	if a := b.usage(t, `{"policy":"slots","key":"k"}`); !a.Allowed {
		t.Errorf("lease after the unreleased one expired = %+v, want allowed", a)
	}
}

// Two nodes sharing Redis: a reservation taken through one node is
// settled through the other.
func TestReservationAcrossNodesOverHTTP(t *testing.T) {
	t.Parallel()
	client := enginetest.RedisClient(t, enginetest.RedisURL(t))
	prefix := "sluicetest:httpusage:" + rand.Text()[:12] + ":"
	t.Cleanup(func() { // the test's keys, off the shared server
		ctx := context.Background()
		var cursor uint64
		for {
			e, err := client.Do(ctx, client.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				return
			}
			if len(e.Elements) > 0 {
				client.Do(ctx, client.B().Unlink().Key(e.Elements...).Build())
			}
			if cursor = e.Cursor; cursor == 0 {
				return
			}
		}
	})
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
	node := func() *bundle {
		rs, err := redisstore.New(client, redisstore.Options{Prefix: prefix, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return setupUsageOn(t, clock, rs)
	}
	a, b := node(), node()
	r := a.usage(t, `{"policy":"tpm","key":"k","cost":400,"reserve":true}`)
	if !r.Allowed || r.ReservationID == "" {
		t.Fatalf("reserve on node A = %+v", r)
	}
	if code, got := b.settleCall(t, r.ReservationID, 100); code != 200 || got["already_settled"] != false {
		t.Fatalf("settle on node B = %d %v", code, got)
	}
	if got := a.remaining(t, "tpm", "k"); got != 900 {
		t.Errorf("tokens seen from node A after node B settled 400 as 100 = %d, want 900", got)
	}
	if code, got := a.settleCall(t, r.ReservationID, 100); code != 200 || got["already_settled"] != true {
		t.Errorf("second settle on node A = %d %v, want already_settled", code, got)
	}
}
