package redisstore_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// The fast section (single-check allows on token buckets, GCRA and fixed
// windows, one or two reply numbers each, the decision rebuilt in Go) decides exactly as the
// memory store: random policies, costs and clock steps, both stores on one
// clock, every decision compared field by field. Concurrent callers fill
// batches with several fast groups (policies and costs) at once.
func TestFastPathMatchesMemory(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	r := rand.New(rand.NewPCG(19, 1))
	for round := range 12 {
		clock := ratelimittest.NewClock(ratelimittest.Epoch)
		var mu sync.Mutex // the clock moves between steps only
		rs, err := redisstore.New(client, redisstore.Options{Prefix: testPrefix(t, client), Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		mem := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now})
		var policies []*ratelimit.Policy
		for i := range 4 {
			p := &ratelimit.Policy{Name: "p" + string(rune('a'+i)), Algorithm: ratelimit.TokenBucket, Limit: 1 + r.Int64N(50), Period: time.Duration(1+r.Int64N(5_000_000)) * time.Microsecond}
			switch r.IntN(3) {
			case 1:
				p.Algorithm = ratelimit.GCRA
			case 2:
				p.Algorithm = ratelimit.FixedWindow
			}
			if r.IntN(2) == 0 && p.Algorithm != ratelimit.FixedWindow {
				p.Burst = 1 + r.Int64N(80)
			}
			if round == 0 && i == 0 { // a period whose µs share a factor with the limit, scaled down
				p.Limit, p.Period, p.Burst = 1<<20, time.Duration(1<<40)*time.Microsecond, 1<<20
			}
			policies = append(policies, p)
		}
		for range 30 {
			clock.Advance(time.Duration(r.Int64N(400_000)) * time.Microsecond)
			type op struct {
				p    *ratelimit.Policy
				key  string
				cost int64
			}
			ops := make([]op, 8)
			for i := range ops {
				p := policies[r.IntN(len(policies))]
				ops[i] = op{p, "k" + string(rune('0'+i)), 1 + r.Int64N(min(3, p.MaxCost()))}
			}
			got := make([]ratelimit.Decision, len(ops))
			var wg sync.WaitGroup
			mu.Lock()
			for i, o := range ops {
				wg.Go(func() {
					d, err := rs.Allow(t.Context(), o.p, o.key, o.cost)
					if err != nil {
						t.Error(err)
					}
					got[i] = d
				})
			}
			wg.Wait()
			mu.Unlock()
			for i, o := range ops {
				want, err := mem.Allow(t.Context(), o.p, o.key, o.cost)
				if err != nil {
					t.Fatal(err)
				}
				if got[i] != want {
					t.Fatalf("round %d, %+v key %s cost %d at %v: redis %+v, memory %+v", round, *o.p, o.key, o.cost, clock.Now(), got[i], want)
				}
			}
		}
	}
}

// Concurrent callers on one key fill batches with the same key many times
// over; each check reads its key after the one before it wrote, so the
// count is still exact.
func TestFastPathSameKeyInBatch(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Options{})
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.FixedWindow} {
		p := &ratelimit.Policy{Name: "day", Algorithm: alg, Limit: 300, Period: 24 * time.Hour}
		got := ratelimittest.Flood(t, 64, 10, func() (bool, error) {
			d, err := s.Allow(t.Context(), p, "shared", 1)
			return d.Allowed, err
		})
		if got != 300 {
			t.Errorf("%s: 640 concurrent checks of one key on a limit of 300: %d allowed, want 300", alg, got)
		}
	}
}

// A fast check sets a key's expiry to twice its time to full and the next
// checks keep it while it outlasts their time to full: the key never
// expires before it is full again (on the server's clock), nor lingers
// more than twice as long.
func TestFastPathExpiry(t *testing.T) {
	t.Parallel()
	s, client := newStore(t, redisstore.Options{})
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA} {
		p := &ratelimit.Policy{Name: "exp", Algorithm: alg, Limit: 100, Period: 100 * time.Second}
		name := redisstore.KeyNameForTest(s, p, "k")
		var prev int64
		kept := false
		for i := range 30 {
			d, err := s.Allow(t.Context(), p, "k", 1)
			if err != nil || !d.Allowed {
				t.Fatalf("%s: check %d = %+v, %v; want allowed", alg, i, d, err)
			}
			ttl, err := client.Do(t.Context(), client.B().Pttl().Key(name).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			// A few ms of real time pass between the check and PTTL.
			full := (d.ResetAfter + time.Millisecond - 1).Milliseconds()
			if ttl < full-50 || ttl > 2*full+1 {
				t.Errorf("%s: check %d: PTTL %d ms, ResetAfter %v; want between the time to full and twice it", alg, i, ttl, d.ResetAfter)
			}
			if i > 0 && ttl <= prev {
				kept = true
			}
			prev = ttl
		}
		if !kept {
			t.Errorf("%s: every check moved the expiry; want later checks to keep it", alg)
		}
	}
}
