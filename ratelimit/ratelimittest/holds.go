package ratelimittest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Unsettled reservations count toward the limit in every mode, and their
// number is bounded per key and per owner, so a flood of reservations
// that are never settled can neither pass the limit nor grow the store.

func testHolds(t *testing.T, h Harness) {
	t.Run("on settle flood", func(t *testing.T) { testOnSettleFlood(t, h) })
	t.Run("on settle outcomes", func(t *testing.T) { testOnSettleOutcomes(t, h) })
	t.Run("per key bound", func(t *testing.T) {
		b := h.setup(t)
		us := usageStore(t, b)
		p := policy(ratelimit.FixedWindow, 1_000_000, time.Hour, 0) // nothing refills while the test runs
		opts := ratelimit.UsageOptions{Charge: ratelimit.ChargeOnSettle, MaxHolds: 3, TTL: time.Minute}
		c := []ratelimit.Check{{Policy: p, Key: "k", Cost: 1}}
		var first ratelimit.Hold
		for i := range 3 {
			r := b.hold(t, opts, c...)
			if !r.Allowed {
				t.Fatalf("hold %d = %+v, want allowed", i, r)
			}
			if i == 0 {
				first = r
			}
		}
		if r, err := us.Hold(b.Ctx, rand.Text(), c, opts); !errors.Is(err, ratelimit.ErrTooManyHolds) || r.Allowed {
			t.Fatalf("fourth unsettled hold = %+v, %v; want ErrTooManyHolds", r, err)
		}
		if d := b.Peek(t, p, "k"); d.Remaining != 1_000_000-3 {
			t.Errorf("remaining after the refused hold = %d, want %d (it took nothing)", d.Remaining, 1_000_000-3)
		}
		other := []ratelimit.Check{{Policy: p, Key: "other", Cost: 1}}
		if r := b.hold(t, opts, other...); !r.Allowed {
			t.Errorf("hold on another key = %+v, want allowed (the bound is per key)", r)
		}
		b.settle(t, first.ID, 0)
		if r := b.hold(t, opts, c...); !r.Allowed {
			t.Errorf("hold after one was settled = %+v, want allowed", r)
		}
		b.Clock.Advance(time.Minute) // every hold expired: none counts
		for i := range 3 {
			if r := b.hold(t, opts, c...); !r.Allowed {
				t.Fatalf("hold %d after expiry = %+v, want allowed", i, r)
			}
		}
	})
	t.Run("per owner bound", func(t *testing.T) {
		b := h.setup(t)
		us := usageStore(t, b)
		p := policy(ratelimit.FixedWindow, 1_000_000, time.Minute, 0)
		opts := ratelimit.UsageOptions{Owner: "api-key-1", MaxOwnerHolds: 2}
		var ids []string
		for i := range 2 {
			ids = append(ids, b.hold(t, opts, ratelimit.Check{Policy: p, Key: fmt.Sprint("user", i), Cost: 1}).ID)
		}
		c := []ratelimit.Check{{Policy: p, Key: "user9", Cost: 1}}
		if _, err := us.Hold(b.Ctx, rand.Text(), c, opts); !errors.Is(err, ratelimit.ErrTooManyHolds) {
			t.Fatalf("third hold of the owner on a new key: %v, want ErrTooManyHolds", err)
		}
		if r := b.hold(t, ratelimit.UsageOptions{Owner: "api-key-2", MaxOwnerHolds: 2}, c...); !r.Allowed {
			t.Errorf("hold of another owner = %+v, want allowed", r)
		}
		b.settle(t, ids[1], 1)
		if r := b.hold(t, opts, c...); !r.Allowed {
			t.Errorf("hold after the owner settled one = %+v, want allowed", r)
		}
	})
}

// testOnSettleFlood takes many on_settle reservations at once on a policy
// of 5 a minute, none settled: at most 5 are admitted and the key
// answers 0 remaining.
func testOnSettleFlood(t *testing.T, h Harness) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowLog, ratelimit.SlidingWindowCounter} {
		t.Run(string(alg), func(t *testing.T) {
			b := h.setup(t)
			us := usageStore(t, b)
			p := policy(alg, 5, time.Minute, 0)
			c := []ratelimit.Check{{Policy: p, Key: "login:ann", Cost: 1}}
			opts := ratelimit.UsageOptions{Charge: ratelimit.ChargeOnSettle}
			const workers, each = 8, 25
			admitted := Flood(t, workers, each, func() (bool, error) {
				r, err := us.Hold(b.Ctx, rand.Text(), c, opts)
				if err != nil {
					return false, fmt.Errorf("hold: %w", err)
				}
				return r.Allowed, nil
			})
			if admitted != 5 {
				t.Errorf("%d of %d unsettled on_settle holds admitted on 5 a minute, want 5", admitted, workers*each)
			}
			if d := b.Peek(t, p, "login:ann"); d.Allowed || d.Remaining != 0 {
				t.Errorf("key after the flood: %+v, want refused with 0 remaining", d)
			}
		})
	}
}

// testOnSettleOutcomes is failed-login counting: successes settle with 0
// and never count, failures settle with 1; an expired hold counts.
func testOnSettleOutcomes(t *testing.T, h Harness) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowLog, ratelimit.SlidingWindowCounter} {
		t.Run(string(alg), func(t *testing.T) {
			b := h.setup(t)
			p := policy(alg, 3, time.Hour, 0)
			opts := ratelimit.UsageOptions{Charge: ratelimit.ChargeOnSettle, TTL: time.Minute}
			c := ratelimit.Check{Policy: p, Key: "login:bob", Cost: 1}
			for i := range 10 { // successes
				r := b.hold(t, opts, c)
				if !r.Allowed {
					t.Fatalf("success %d: hold = %+v, want allowed", i, r)
				}
				b.settle(t, r.ID, 0)
			}
			if d := b.Peek(t, p, "login:bob"); d.Remaining != 3 {
				t.Fatalf("after 10 successes remaining = %d, want 3", d.Remaining)
			}
			b.settle(t, b.hold(t, opts, c).ID, 1) // a failure
			b.hold(t, opts, c)                    // never settled: expires counting
			b.Clock.Advance(time.Minute)
			if d := b.Peek(t, p, "login:bob"); d.Remaining != 1 {
				t.Errorf("after a failure and an expired hold remaining = %d, want 1", d.Remaining)
			}
		})
	}
}
