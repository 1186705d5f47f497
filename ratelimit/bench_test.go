package ratelimit_test

import (
	"context"
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/ratelimit"
)

// The memory store beside the usual ways of keeping many limiters in one
// process: golang.org/x/time/rate limiters in a sharded map and in a
// mutex-guarded map, and sethvargo/go-limiter's memory store. Every check
// is allowed (the limits are far above the load), keys are visited in a
// pseudo-random order so large key sets miss the CPU caches as real
// traffic does, and each implementation reads the real clock. Results and
// the commands are in docs/benchmarks.md.
//
//	go test -run '^$' -bench BenchmarkMemory -benchmem -cpu 1,2 -benchtime 1s ./ratelimit/

var benchKeyCounts = []int{1, 100_000, 1_000_000}

func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "api_key:" + strconv.Itoa(i)
	}
	return keys
}

// runKeys runs check over keys from b.RunParallel goroutines, each walking
// the keys in its own pseudo-random order. Besides ns/op (wall time) it
// reports cpu-ns/op, the process's CPU time per check: on a machine shared
// with other work it leaves out the time the benchmark was not running,
// which is most of the noise in ns/op.
func runKeys(b *testing.B, keys []string, check func(key string) bool) {
	b.Helper()
	var seed, refused atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		x := seed.Add(0x9E3779B97F4A7C15) | 1
		n := uint64(len(keys))
		for pb.Next() {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			if !check(keys[x%n]) {
				refused.Add(1)
			}
		}
	})
	if cpu := cpuTime() - cpu0; cpu0 > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	}
	if r := refused.Load(); r > 0 {
		b.ReportMetric(float64(r)/float64(b.N), "refused/op")
	}
}

// warm makes every key exist before timing, as in a steady state.
func warm(keys []string, check func(string) bool) {
	for _, k := range keys {
		check(k)
	}
}

func BenchmarkMemory(b *testing.B) {
	for _, n := range benchKeyCounts {
		keys := benchKeys(n)
		b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
			for _, impl := range []struct {
				name string
				alg  ratelimit.Algorithm
			}{{"impl=sluice", ratelimit.TokenBucket}, {"impl=sluice-gcra", ratelimit.GCRA}} {
				b.Run(impl.name, func(b *testing.B) {
					store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
					p := &ratelimit.Policy{Name: "bench", Algorithm: impl.alg, Limit: 1, Period: time.Minute, Burst: 1e8}
					ctx := context.Background()
					check := func(k string) bool {
						d, err := store.Allow(ctx, p, k, 1)
						return err == nil && d.Allowed
					}
					warm(keys, check)
					runKeys(b, keys, check)
				})
			}
			b.Run("impl=xrate-sharded", func(b *testing.B) {
				m := newShardedRate(256)
				warm(keys, m.allow)
				runKeys(b, keys, m.allow)
			})
			b.Run("impl=xrate-mutex", func(b *testing.B) {
				m := &mutexRate{m: map[string]*rate.Limiter{}}
				warm(keys, m.allow)
				runKeys(b, keys, m.allow)
			})
			b.Run("impl=go-limiter", func(b *testing.B) {
				store, err := memorystore.New(&memorystore.Config{Tokens: 1e9, Interval: time.Second, SweepInterval: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				defer store.Close(context.Background())
				var _ limiter.Store = store
				ctx := context.Background()
				check := func(k string) bool {
					_, _, _, ok, err := store.Take(ctx, k)
					return err == nil && ok
				}
				warm(keys, check)
				runKeys(b, keys, check)
			})
		})
	}
}

const benchRate = rate.Limit(1e9)

// The sluice buckets refill one token a minute from a burst of 1e8: every
// check moves a key a minute further from full, so no key goes idle (and
// is dropped) between visits during a run; the x/time/rate maps never
// drop a key.

// shardedRate is x/time/rate limiters in a sharded map, the usual way to
// keep one per key.
type shardedRate struct {
	seed   maphash.Seed
	shards []rateShard
}

type rateShard struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
	_  [40]byte
}

func newShardedRate(n int) *shardedRate {
	s := &shardedRate{seed: maphash.MakeSeed(), shards: make([]rateShard, n)}
	for i := range s.shards {
		s.shards[i].m = map[string]*rate.Limiter{}
	}
	return s
}

func (s *shardedRate) allow(key string) bool {
	sh := &s.shards[maphash.String(s.seed, key)%uint64(len(s.shards))]
	sh.mu.Lock()
	l, ok := sh.m[key]
	if !ok {
		l = rate.NewLimiter(benchRate, 1<<30)
		sh.m[key] = l
	}
	sh.mu.Unlock()
	return l.Allow()
}

// mutexRate is x/time/rate limiters in one mutex-guarded map.
type mutexRate struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func (s *mutexRate) allow(key string) bool {
	s.mu.Lock()
	l, ok := s.m[key]
	if !ok {
		l = rate.NewLimiter(benchRate, 1<<30)
		s.m[key] = l
	}
	s.mu.Unlock()
	return l.Allow()
}

// BenchmarkMemoryAlgorithms is one key's Allow under every algorithm.
func BenchmarkMemoryAlgorithms(b *testing.B) {
	for _, alg := range ratelimit.Algorithms() {
		b.Run("alg="+string(alg), func(b *testing.B) {
			store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
			p := &ratelimit.Policy{Name: "bench", Algorithm: alg, Limit: 1, Period: time.Minute, Burst: 1e8}
			if alg == ratelimit.SlidingWindowLog || alg == ratelimit.Concurrency {
				p.Limit = 1e9
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := store.Allow(ctx, p, "k", 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
