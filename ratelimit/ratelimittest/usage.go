package ratelimittest

import (
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Usage-based limits: after-the-fact charges, reservations settled with
// the real cost, charging only on settle, leases released by settling.

func usageStore(t *testing.T, b *Bundle) ratelimit.UsageStore {
	t.Helper()
	us, ok := b.Store.(ratelimit.UsageStore)
	if !ok {
		t.Fatalf("%T does not implement ratelimit.UsageStore", b.Store)
	}
	return us
}

func (b *Bundle) hold(t *testing.T, opts ratelimit.UsageOptions, checks ...ratelimit.Check) ratelimit.Hold {
	t.Helper()
	h, err := usageStore(t, b).Hold(b.Ctx, rand.Text(), checks, opts)
	if err != nil {
		t.Fatalf("Hold: %v", err)
	}
	return h
}

func (b *Bundle) settle(t *testing.T, id string, cost int64) ratelimit.Settlement {
	t.Helper()
	s, err := usageStore(t, b).Settle(b.Ctx, id, cost)
	if err != nil {
		t.Fatalf("Settle(%q, %d): %v", id, cost, err)
	}
	return s
}

func (b *Bundle) charge(t *testing.T, checks ...ratelimit.Check) []ratelimit.Decision {
	t.Helper()
	ds, err := usageStore(t, b).Charge(b.Ctx, checks)
	if err != nil {
		t.Fatalf("Charge: %v", err)
	}
	return ds
}

func testUsage(t *testing.T, h Harness) {
	t.Run("debt", func(t *testing.T) { testDebt(t, h) })
	t.Run("max debt", func(t *testing.T) {
		b := h.setup(t)
		p := policy(ratelimit.TokenBucket, 10, 10*time.Second, 0)
		p.MaxDebt = 5
		d := b.charge(t, ratelimit.Check{Policy: p, Key: "k", Cost: 100})[0]
		if d.Allowed || d.RetryAfter != 6*time.Second {
			t.Errorf("after charging 100 with max_debt 5: %+v, want refused for 6s (5 of debt, then 1 token)", d)
		}
	})
	t.Run("settle replaces the estimate", func(t *testing.T) { testSettle(t, h) })
	t.Run("expiry keeps the estimate", func(t *testing.T) {
		b := h.setup(t)
		p := policy(ratelimit.TokenBucket, 60, time.Hour, 0)
		r := b.hold(t, ratelimit.UsageOptions{TTL: time.Minute}, ratelimit.Check{Policy: p, Key: "k", Cost: 30})
		if want := Epoch.Add(time.Minute); !r.ExpiresAt.Equal(want) {
			t.Errorf("ExpiresAt = %v, want %v", r.ExpiresAt, want)
		}
		b.Clock.Advance(time.Minute)
		if _, err := usageStore(t, b).Settle(b.Ctx, r.ID, 1); !errors.Is(err, ratelimit.ErrReservationNotFound) {
			t.Errorf("Settle after the TTL: %v, want ErrReservationNotFound", err)
		}
		if d := b.Peek(t, p, "k"); d.Remaining != 31 {
			t.Errorf("after expiry remaining = %d, want 31 (the estimate kept, one minute refilled)", d.Remaining)
		}
		if _, err := usageStore(t, b).Settle(b.Ctx, "no-such-id", 1); !errors.Is(err, ratelimit.ErrReservationNotFound) {
			t.Errorf("Settle of an unknown id: %v, want ErrReservationNotFound", err)
		}
	})
	t.Run("on settle", func(t *testing.T) {
		b := h.setup(t)
		p := policy(ratelimit.FixedWindow, 2, time.Minute, 0)
		opts := ratelimit.UsageOptions{Charge: ratelimit.ChargeOnSettle}
		for i := range 3 { // settled with 0: a successful login, never counted
			r := b.hold(t, opts, ratelimit.Check{Policy: p, Key: "ann", Cost: 1})
			if !r.Allowed || r.Decisions[0].Remaining != 1 {
				t.Fatalf("hold %d = %+v, want allowed with 1 remaining (it would charge 1)", i, r)
			}
			b.settle(t, r.ID, 0)
		}
		if d := b.Peek(t, p, "ann"); d.Remaining != 2 {
			t.Fatalf("after settling with 0: remaining %d, want 2", d.Remaining)
		}
		for range 2 { // two failures, counted
			b.settle(t, b.hold(t, opts, ratelimit.Check{Policy: p, Key: "ann", Cost: 1}).ID, 1)
		}
		if r := b.hold(t, opts, ratelimit.Check{Policy: p, Key: "ann", Cost: 1}); r.Allowed || r.ID != "" {
			t.Errorf("hold after two counted failures = %+v, want refused without an id", r)
		}
	})
	t.Run("lease", func(t *testing.T) {
		b := h.setup(t)
		p := &ratelimit.Policy{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: 1, Period: 30 * time.Second}
		c := ratelimit.Check{Policy: p, Key: "k", Cost: 1}
		r := b.hold(t, ratelimit.UsageOptions{Charge: ratelimit.ChargeOnSettle}, c)
		if !r.Allowed {
			t.Fatalf("first lease = %+v, want allowed", r)
		}
		if r2 := b.hold(t, ratelimit.UsageOptions{}, c); r2.Allowed {
			t.Fatalf("second lease while the first is held = %+v, want refused", r2)
		}
		b.settle(t, r.ID, 7) // any cost releases a lease
		r = b.hold(t, ratelimit.UsageOptions{}, c)
		if !r.Allowed {
			t.Fatalf("lease after release = %+v, want allowed", r)
		}
		b.Clock.Advance(30 * time.Second) // never settled: its holder crashed
		if r3 := b.hold(t, ratelimit.UsageOptions{}, c); !r3.Allowed {
			t.Errorf("lease after the unsettled one expired = %+v, want allowed", r3)
		}
	})
	t.Run("multi-key", func(t *testing.T) { testUsageMulti(t, h) })
	t.Run("holds", func(t *testing.T) { testHolds(t, h) })
	t.Run("errors", func(t *testing.T) {
		b := h.setup(t)
		us := usageStore(t, b)
		p := policy(ratelimit.TokenBucket, 10, time.Second, 0)
		if _, err := us.Hold(b.Ctx, "x", []ratelimit.Check{{Policy: p, Key: "k", Cost: 11}}, ratelimit.UsageOptions{}); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
			t.Errorf("Hold over the burst: %v, want ErrCostExceedsLimit", err)
		}
		if _, err := us.Charge(b.Ctx, []ratelimit.Check{{Policy: p, Key: "k", Cost: -1}}); !errors.Is(err, ratelimit.ErrInvalidUsage) {
			t.Errorf("Charge of -1: %v, want ErrInvalidUsage", err)
		}
		r := b.hold(t, ratelimit.UsageOptions{}, ratelimit.Check{Policy: p, Key: "k", Cost: 1})
		if _, err := us.Settle(b.Ctx, r.ID, -1); !errors.Is(err, ratelimit.ErrInvalidUsage) {
			t.Errorf("Settle with -1: %v, want ErrInvalidUsage", err)
		}
	})
}

// A charge is never refused and pushes each algorithm into debt; checks
// are refused until it is repaid.
func testDebt(t *testing.T, h Harness) {
	tests := []struct {
		alg             ratelimit.Algorithm
		refused, repaid time.Duration
	}{
		{ratelimit.TokenBucket, 15 * time.Second, 16 * time.Second},
		{ratelimit.GCRA, 15 * time.Second, 16 * time.Second},
		{ratelimit.FixedWindow, 9999 * ms, 10 * time.Second},
		{ratelimit.SlidingWindowLog, 9999 * ms, 10 * time.Second},
		{ratelimit.SlidingWindowCounter, 10 * time.Second, 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			b := h.setup(t)
			p := policy(tt.alg, 10, 10*time.Second, 0)
			d := b.charge(t, ratelimit.Check{Policy: p, Key: "k", Cost: 25})[0]
			if d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 {
				t.Errorf("after charging 25 of 10: %+v, want refused with 0 remaining and a RetryAfter", d)
			}
			b.At(tt.refused)
			if d := b.Allow(t, p, "k", 1); d.Allowed {
				t.Errorf("at %v: %+v, want still refused (in debt)", tt.refused, d)
			}
			b.At(tt.repaid)
			if d := b.Allow(t, p, "k", 1); !d.Allowed {
				t.Errorf("at %v: %+v, want allowed (debt repaid)", tt.repaid, d)
			}
		})
	}
}

// Settling refunds or charges the difference on every algorithm, and a
// second settle changes nothing.
func testSettle(t *testing.T, h Harness) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowLog, ratelimit.SlidingWindowCounter} {
		t.Run(string(alg), func(t *testing.T) {
			b := h.setup(t)
			p := policy(alg, 10, time.Hour, 0)
			c := ratelimit.Check{Policy: p, Key: "k", Cost: 4}
			r := b.hold(t, ratelimit.UsageOptions{}, c)
			if !r.Allowed || r.ID == "" || r.Decisions[0].Remaining != 6 {
				t.Fatalf("hold 4 = %+v, want allowed with 6 remaining", r)
			}
			if s := b.settle(t, r.ID, 1); s.Already {
				t.Fatalf("first settle says already settled")
			}
			if d := b.Peek(t, p, "k"); d.Remaining != 9 {
				t.Fatalf("after settling 4 as 1: remaining %d, want 9", d.Remaining)
			}
			if s := b.settle(t, r.ID, 8); !s.Already {
				t.Errorf("second settle: %+v, want Already", s)
			}
			if d := b.Peek(t, p, "k"); d.Remaining != 9 {
				t.Fatalf("after a second settle: remaining %d, want 9 (unchanged)", d.Remaining)
			}
			r = b.hold(t, ratelimit.UsageOptions{}, c)
			b.settle(t, r.ID, 12) // 1 + 12: 3 over the limit
			if d := b.Peek(t, p, "k"); d.Allowed || d.Remaining != 0 {
				t.Errorf("after settling 4 as 12: %+v, want refused (in debt)", d)
			}
		})
	}
}

// Requests per minute and tokens per minute, reserved and settled
// together: the request count is final, the tokens are replaced.
func testUsageMulti(t *testing.T, h Harness) {
	b := h.setup(t)
	rpm := policy(ratelimit.FixedWindow, 3, time.Minute, 0)
	tpm := policy(ratelimit.TokenBucket, 100, time.Hour, 0)
	checks := []ratelimit.Check{{Policy: rpm, Key: "k", Cost: 1, Fixed: true}, {Policy: tpm, Key: "k", Cost: 50}}
	r := b.hold(t, ratelimit.UsageOptions{}, checks...)
	if !r.Allowed || len(r.Decisions) != 2 || r.Decisions[1].Remaining != 50 {
		t.Fatalf("hold = %+v, want allowed, 50 tokens left", r)
	}
	b.settle(t, r.ID, 20)
	if d := b.Peek(t, rpm, "k"); d.Remaining != 2 {
		t.Errorf("requests remaining = %d, want 2 (the fixed cost stays)", d.Remaining)
	}
	if d := b.Peek(t, tpm, "k"); d.Remaining != 80 {
		t.Errorf("tokens remaining = %d, want 80", d.Remaining)
	}
	checks[1].Cost = 90 // over: nothing is taken from either key
	if r := b.hold(t, ratelimit.UsageOptions{}, checks...); r.Allowed || !r.Decisions[0].Allowed || r.Decisions[1].Allowed {
		t.Fatalf("hold over the token budget = %+v, want refused by tokens only", r)
	}
	if d := b.Peek(t, rpm, "k"); d.Remaining != 2 {
		t.Errorf("requests remaining after a refused hold = %d, want 2", d.Remaining)
	}
}
