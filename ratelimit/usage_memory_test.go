package ratelimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// A settled reservation is remembered as settled for a minute, then
// forgotten: settling it again changes nothing either way.
func TestMemorySettledTombstoneExpires(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now})
	p := ratelimit.Policy{Name: "tpm", Algorithm: ratelimit.TokenBucket, Limit: 100, Period: time.Hour}
	l, err := ratelimit.NewPolicyLimiter(store, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	r, err := l.ReserveUsage(ctx, "k", 10, ratelimit.UsageOptions{})
	if err != nil || !r.Allowed {
		t.Fatalf("ReserveUsage = %+v, %v", r, err)
	}
	if err := r.Settle(ctx, 4); err != nil {
		t.Fatal(err)
	}
	clock.Advance(59 * time.Second)
	if s, err := store.Settle(ctx, r.ID, 50); err != nil || !s.Already {
		t.Errorf("settle again within the minute = %+v, %v; want Already", s, err)
	}
	clock.Advance(time.Second)
	// Another reservation sweeps the expired tombstone.
	if _, err := l.ReserveUsage(ctx, "other", 1, ratelimit.UsageOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Settle(ctx, r.ID, 50); !errors.Is(err, ratelimit.ErrReservationNotFound) {
		t.Errorf("settle again after the minute: %v, want ErrReservationNotFound", err)
	}
	if d, _ := l.Peek(ctx, "k"); d.Remaining != 97 {
		t.Errorf("remaining = %d, want 97 (4 charged, a minute refilled 1.67)", d.Remaining)
	}
}
