package ratelimit_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestAllowFastPath holds Allow, whose buckets' common case (a live key,
// an allowed check) is written out apart from the algorithms' reference
// arithmetic, to that arithmetic: the same random checks go to one store
// through Allow and to another through AllowMulti with a single check
// (which steps the reference), and every Decision, and every Peek after
// it, must be the same. Keys of 0 to 40 bytes cover the hash's inlined
// 8-to-16-byte case and its other lengths (Peek hashes through the
// general function), and the clock sometimes stands still or steps back.
// Each round uses 8 keys, too few to make a store sweep: a key swept idle
// in one store and not in the other would come back to life in only one
// of them when the clock steps back.
func TestAllowFastPath(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(3, 4))
	keys := make([]string, 41)
	for n := range keys {
		keys[n] = strings.Repeat("k", n/2) + strings.Repeat("\x00", n-n/2)
	}
	for round := range 200 {
		alg := ratelimit.TokenBucket
		if round%2 == 1 {
			alg = ratelimit.GCRA
		}
		p := &ratelimit.Policy{
			Name: "fast", Algorithm: alg,
			Limit: 1 + rng.Int64N(20), Period: time.Duration(1+rng.Int64N(3000)) * time.Millisecond,
			Burst: rng.Int64N(30),
		}
		now := time.Unix(1_700_000_000, 0)
		clock := func() time.Time { return now }
		fast := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock, Shards: 1})
		ref := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock, Shards: 1})
		var roundKeys [8]string
		for j := range roundKeys {
			roundKeys[j] = keys[rng.IntN(len(keys))]
		}
		for i := range 400 {
			switch rng.IntN(8) {
			case 0: // the clock stands still
			case 1:
				now = now.Add(-time.Duration(rng.Int64N(int64(p.Period / 4))))
			default:
				now = now.Add(time.Duration(rng.Int64N(int64(p.Period / 3))))
			}
			key := roundKeys[rng.IntN(len(roundKeys))]
			cost := 1 + rng.Int64N(p.MaxCost())
			got, err := fast.Allow(ctx, p, key, cost)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := ref.AllowMulti(ctx, []ratelimit.Check{{Policy: p, Key: key, Cost: cost}})
			if err != nil {
				t.Fatal(err)
			}
			if got != ds[0] {
				t.Fatalf("round %d check %d, %+v key %q cost %d: Allow = %+v, AllowMulti = %+v", round, i, *p, key, cost, got, ds[0])
			}
			gp, _ := fast.Peek(ctx, p, key)
			wp, _ := ref.Peek(ctx, p, key)
			if gp != wp {
				t.Fatalf("round %d check %d, %+v key %q: Peek after Allow = %+v, after AllowMulti = %+v", round, i, *p, key, gp, wp)
			}
		}
	}
}
