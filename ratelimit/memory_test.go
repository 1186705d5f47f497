package ratelimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Exercise(t, ratelimittest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) ratelimit.Store {
			return ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: now})
		},
		Idle: func(t *testing.T, store ratelimit.Store, clock *ratelimittest.Clock, p *ratelimit.Policy, key string, resetAfter time.Duration) {
			t.Helper()
			m := store.(*ratelimit.MemoryStore)
			m.Sweep()
			if n := m.Len(); n != 0 {
				t.Errorf("MemoryStore holds %d keys after they went idle and Sweep, want 0", n)
			}
		},
	})
}

// TestMemoryStorePolicyCache changes a policy in place between checks: the
// store caches what it prepares from a policy per shard, and must notice
// every change, whatever the pointer.
func TestMemoryStorePolicyCache(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	now := time.Unix(1_700_000_000, 0)
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: func() time.Time { return now }, Shards: 1})
	p := &ratelimit.Policy{Name: "cache", Algorithm: ratelimit.TokenBucket, Limit: 10, Period: time.Second}
	allow := func(cost int64) ratelimit.Decision {
		t.Helper()
		d, err := store.Allow(ctx, p, "k", cost)
		if err != nil {
			t.Fatalf("Allow(%+v, %d): %v", *p, cost, err)
		}
		return d
	}
	if d := allow(4); !d.Allowed || d.Limit != 10 || d.Remaining != 6 {
		t.Fatalf("first check = %+v, want allowed, limit 10, 6 remaining", d)
	}
	p.Burst = 20 // a larger bucket: the state is kept, the capacity grows
	if d := allow(1); !d.Allowed || d.Limit != 20 || d.Remaining != 5 {
		t.Errorf("after Burst = 20: %+v, want allowed, limit 20, 5 remaining", d)
	}
	p.Algorithm = ratelimit.FixedWindow // another algorithm: a fresh state
	if d := allow(3); !d.Allowed || d.Limit != 10 || d.Remaining != 7 {
		t.Errorf("after Algorithm = fixed_window: %+v, want allowed, limit 10, 7 remaining", d)
	}
	p.Algorithm, p.Name = ratelimit.TokenBucket, "cache2" // another name: another state
	if d := allow(1); !d.Allowed || d.Limit != 20 || d.Remaining != 19 {
		t.Errorf("after Name = cache2: %+v, want allowed, limit 20, 19 remaining", d)
	}
	p.Period = 0 // invalid: refused with the validation error, even though cached before
	if _, err := store.Allow(ctx, p, "k", 1); !errors.Is(err, ratelimit.ErrInvalidPolicy) {
		t.Errorf("Allow with Period 0 = %v, want ErrInvalidPolicy", err)
	}
	p.Period = time.Second
	if _, err := store.Allow(ctx, p, "k", 21); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		t.Errorf("Allow with cost 21 > burst 20 = %v, want ErrCostExceedsLimit", err)
	}
	// A copy of the policy (another pointer) shares the state.
	q := *p
	d, err := store.Allow(ctx, &q, "k", 1)
	if err != nil || !d.Allowed || d.Remaining != 18 {
		t.Errorf("Allow(copy) = %+v, %v, want allowed, 18 remaining", d, err)
	}
}
