package redisstore_test

import (
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// newClusterClient starts a 3-master Redis Cluster for the test and
// connects to it.
func newClusterClient(t testing.TB) rueidis.Client {
	t.Helper()
	cluster := enginetest.StartRedisCluster(t, 3, 0)
	c := enginetest.RedisClient(t, cluster.URL())
	if c.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("client mode %v, want cluster", c.Mode())
	}
	return c
}

// clusterPrefix isolates a test's keys on the test's own cluster.
func clusterPrefix() string {
	var b [6]byte
	_, _ = crand.Read(b[:])
	return "sluicetest:rl:" + hex.EncodeToString(b[:]) + ":"
}

// bySlot returns n keys under p in n different slots, in ascending slot
// order.
func bySlot(t *testing.T, s *redisstore.Store, p *ratelimit.Policy, n int) []string {
	t.Helper()
	slots := map[int]string{}
	for i := 0; len(slots) < n; i++ {
		k := fmt.Sprintf("key%d", i)
		slots[redisstore.SlotForTest(p, k, s)] = k
	}
	keys := make([]string, 0, n)
	for _, slot := range slices.Sorted(func(yield func(int) bool) {
		for s := range slots {
			if !yield(s) {
				return
			}
		}
	}) {
		keys = append(keys, slots[slot])
	}
	return keys
}

func TestCluster(t *testing.T) {
	t.Parallel()
	client := newClusterClient(t)
	newStore := func(t *testing.T, now func() time.Time) *redisstore.Store {
		s, err := redisstore.New(client, redisstore.Options{Prefix: clusterPrefix(), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	t.Run("Conformance", func(t *testing.T) {
		t.Parallel()
		ratelimittest.Exercise(t, ratelimittest.Harness{
			NewStore: func(t *testing.T, now func() time.Time) ratelimit.Store { return newStore(t, now) },
		})
	})

	// A refusal at any step of a cross-slot check leaves every key as it
	// was, for every algorithm.
	t.Run("CrossSlotAllOrNothing", func(t *testing.T) {
		t.Parallel()
		for _, alg := range ratelimit.Algorithms() {
			for _, refuser := range []string{"first", "middle", "last"} {
				t.Run(string(alg)+"/"+refuser+" slot refuses", func(t *testing.T) {
					t.Parallel()
					clock := ratelimittest.NewClock(ratelimittest.Epoch)
					s := newStore(t, clock.Now)
					p := &ratelimit.Policy{Name: "p", Algorithm: alg, Limit: 3, Period: time.Minute}
					keys := bySlot(t, s, p, 3)
					full := keys[map[string]int{"first": 0, "middle": 1, "last": 2}[refuser]]
					if d, err := s.Allow(t.Context(), p, full, 3); err != nil || !d.Allowed {
						t.Fatalf("Allow(%s, 3) = %+v, %v", full, d, err)
					}
					clock.Advance(time.Millisecond)
					checks := make([]ratelimit.Check, len(keys))
					for i, k := range keys {
						checks[i] = ratelimit.Check{Policy: p, Key: k, Cost: 2}
					}
					ds, err := s.AllowMulti(t.Context(), checks)
					if err != nil {
						t.Fatal(err)
					}
					for i, k := range keys {
						if want := k != full; ds[i].Allowed != want {
							t.Errorf("decision of %s = %+v, want allowed=%v", k, ds[i], want)
						}
						d, err := s.Peek(t.Context(), p, k)
						if err != nil {
							t.Fatal(err)
						}
						if want := map[bool]int64{true: 0, false: 3}[k == full]; d.Remaining != want {
							t.Errorf("Peek(%s) after the refused check = %+v, want %d remaining (nothing left charged)", k, d, want)
						}
					}
					// With room everywhere, the same check is admitted on every key.
					rest := slices.DeleteFunc(slices.Clone(checks), func(c ratelimit.Check) bool { return c.Key == full })
					if ok, ds, err := ratelimit.AllowAll(t.Context(), s, rest); err != nil || !ok || ds[0].Remaining != 1 {
						t.Errorf("AllowAll on the keys with room = %v %+v, %v; want allowed, 1 left each", ok, ds, err)
					}
				})
			}
		}
	})

	// Many goroutines doing cross-slot checks on few keys: no key admits
	// more than its limit, and the refusals caused by charges that were
	// about to be refunded are counted.
	t.Run("ContendedNoOverAdmission", func(t *testing.T) {
		t.Parallel()
		// About 530 charges are asked of each key: the limits of 400 to
		// 600 leave some keys spent and others short of their limit at
		// the end, where false refusals can happen.
		load := contendLoad{goroutines: 32, checksEach: 40, keys: 6, limit: 400, step: 40}
		r := contend(t, newStore(t, fixedClock), load)
		t.Logf("%d goroutines × %d checks of 2 or 3 of %d keys (limits %d to %d): %d checks, %d admitted, %d refused, of which %d false refusals (every key had room at the end)",
			load.goroutines, load.checksEach, load.keys, load.limit, load.limit+int64(load.keys-1)*load.step, r.checks, r.admitted, r.refused, r.falseRefusals)
	})
}

// fixedClock is a clock that never moves: no allowance comes back during a
// contended run, so admissions per key are bounded by the limit exactly.
func fixedClock() time.Time { return ratelimittest.Epoch }

type contendLoad struct {
	goroutines, checksEach, keys int
	limit, step                  int64 // key i's limit is limit + i × step
}

type contendResult struct {
	checks, admitted, refused, falseRefusals int
}

// contend runs the load on s, one policy of a different algorithm per key,
// and fails the test if any key admitted more than its limit. A false
// refusal is a refused check for which every one of its keys still had
// room at the end: with a clock that does not move, a key's room only
// shrinks, except by refunds, so a one-step check is never refused so, and
// each such refusal could have been admitted in addition to all the
// admitted checks without any key exceeding its limit.
func contend(t testing.TB, s *redisstore.Store, load contendLoad) contendResult {
	t.Helper()
	algs := ratelimit.Algorithms()
	policies := make([]*ratelimit.Policy, load.keys)
	for i := range policies {
		policies[i] = &ratelimit.Policy{Name: "c", Algorithm: algs[i%len(algs)], Limit: load.limit + int64(i)*load.step, Period: time.Hour}
	}
	key := func(i int) string { return fmt.Sprintf("k%d", i) }
	var mu sync.Mutex
	admitted := make([]int64, load.keys)
	var res contendResult
	var refused [][]int
	var wg sync.WaitGroup
	for g := range load.goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range load.checksEach {
				idx := r.Perm(load.keys)[:2+r.IntN(2)]
				checks := make([]ratelimit.Check, len(idx))
				for j, i := range idx {
					checks[j] = ratelimit.Check{Policy: policies[i], Key: key(i), Cost: 1}
				}
				ok, _, err := ratelimit.AllowAll(t.Context(), s, checks)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				res.checks++
				if ok {
					res.admitted++
					for _, i := range idx {
						admitted[i]++
					}
				} else {
					res.refused++
					refused = append(refused, idx)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	room := make([]int64, load.keys)
	for i := range room {
		limit := policies[i].Limit
		if admitted[i] > limit {
			t.Errorf("key %d (%s) admitted %d checks, over its limit of %d", i, policies[i].Algorithm, admitted[i], limit)
		}
		d, err := s.Peek(t.Context(), policies[i], key(i))
		if err != nil {
			t.Fatal(err)
		}
		room[i] = d.Remaining
		if want := limit - admitted[i]; d.Remaining != want {
			t.Errorf("key %d (%s): %d remaining after %d admitted, want %d (a refused check left a charge)", i, policies[i].Algorithm, d.Remaining, admitted[i], want)
		}
	}
	for _, idx := range refused {
		if !slices.ContainsFunc(idx, func(i int) bool { return room[i] < 1 }) {
			res.falseRefusals++
		}
	}
	return res
}
