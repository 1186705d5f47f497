package limits_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// A cancelled reservation gives capacity back before the remembered
// refusal's RetryAfter: HotKeys must ask the store again.
func TestHotKeysForgetRefusalOnCancelReservation(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock(time.Unix(1000, 0))
	h := limits.NewHotKeys(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now}), 0, clock.Now)
	p := ratelimit.Policy{Name: "p", Algorithm: ratelimit.TokenBucket, Limit: 1, Period: time.Second}
	ctx := t.Context()
	var rs []ratelimit.Reservation
	for range 2 {
		r, err := h.Reserve(ctx, &p, "k", 1, time.Minute)
		if err != nil || !r.OK {
			t.Fatalf("Reserve = %+v, %v; want OK", r, err)
		}
		rs = append(rs, r)
	}
	if d, err := h.Allow(ctx, &p, "k", 1); err != nil || d.Allowed || d.RetryAfter != 2*time.Second {
		t.Fatalf("Allow during debt = %+v, %v; want refused with RetryAfter 2s", d, err)
	}
	if err := h.CancelReservation(ctx, rs[1]); err != nil {
		t.Fatal(err)
	}
	if d, err := h.Allow(ctx, &p, "k", 1); err != nil || d.Allowed || d.RetryAfter != time.Second {
		t.Errorf("Allow after a cancel = %+v, %v; want refused with RetryAfter 1s", d, err)
	}
}
