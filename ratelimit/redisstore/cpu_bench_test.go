package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// Redis CPU per check: a private redis-server (so nobody else's commands
// count) serves b.N token bucket checks on 100,000 or 1,000 keys, and the
// benchmark reports the server's used_cpu_user+used_cpu_sys over the run
// divided by b.N, the script calls per check (INFO commandstats) and
// checks/s. Sluice batched (token bucket, GCRA, one call in flight),
// Sluice with one check per script call, Sluice with "sync": "local" every
// 50 ms (limits.LocalSync), and github.com/go-redis/redis_rate/v10, at the
// same load. Results and the
// command are in docs/benchmarks.md ("The Redis path, and five more goals").
//
//	CI=true go test -run '^$' -bench BenchmarkRedisCPU -benchtime 200000x ./ratelimit/redisstore/
func BenchmarkRedisCPU(b *testing.B) {
	srv := enginetest.StartRedis(b)
	rc := enginetest.RedisClient(b, srv.URL())
	gopt, err := goredis.ParseURL(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	gopt.PoolSize = 64
	gc := goredis.NewClient(gopt)
	defer gc.Close()

	policy := &ratelimit.Policy{Name: "bench", Algorithm: ratelimit.TokenBucket, Limit: 1_000_000, Period: time.Second}
	gcra := &ratelimit.Policy{Name: "bench", Algorithm: ratelimit.GCRA, Limit: 1_000_000, Period: time.Second}
	rrLimit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}
	sluice := func(p *ratelimit.Policy, opts redisstore.Options) func(b *testing.B) func(ctx context.Context, key string) error {
		return func(b *testing.B) func(ctx context.Context, key string) error {
			s, err := redisstore.New(rc, opts)
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context, key string) error {
				d, err := s.Allow(ctx, p, key, 1)
				if err == nil && !d.Allowed {
					err = fmt.Errorf("refused: %+v", d)
				}
				return err
			}
		}
	}
	impls := []struct {
		name string
		make func(b *testing.B) func(ctx context.Context, key string) error
	}{
		{"sluice", sluice(policy, redisstore.Options{})},
		{"sluice-gcra", sluice(gcra, redisstore.Options{})},
		{"sluice-inflight1", sluice(policy, redisstore.Options{MaxInFlight: 1})},
		{"sluice-unbatched", sluice(policy, redisstore.Options{MaxBatch: 1, MaxInFlight: 1024})},
		{"sluice-local", func(b *testing.B) func(ctx context.Context, key string) error {
			// "sync": "local" every 50 ms in front of the same store.
			s, err := redisstore.New(rc, redisstore.Options{})
			if err != nil {
				b.Fatal(err)
			}
			ls := limits.NewLocalSync(s, limits.LocalSyncOptions{Interval: func(string) time.Duration { return 50 * time.Millisecond }})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = ls.Run(ctx); close(done) }()
			b.Cleanup(func() { cancel(); <-done })
			return func(ctx context.Context, key string) error {
				_, err := ls.Allow(ctx, policy, key, 1)
				return err
			}
		}},
		{"redis_rate", func(b *testing.B) func(ctx context.Context, key string) error {
			l := redis_rate.NewLimiter(gc)
			return func(ctx context.Context, key string) error {
				res, err := l.Allow(ctx, key, rrLimit)
				if err == nil && res.Allowed == 0 {
					err = fmt.Errorf("refused: %+v", res)
				}
				return err
			}
		}},
	}
	for _, run := range []struct{ callers, keys int }{{1, 100_000}, {64, 100_000}, {64, 1_000}} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("keys=%d/callers=%d/impl=%s", run.keys, run.callers, impl.name), func(b *testing.B) {
				ctx := context.Background()
				if err := rc.Do(ctx, rc.B().Flushall().Build()).Error(); err != nil { // the private server
					b.Fatal(err)
				}
				check := impl.make(b)
				cpu0, calls0 := redisCPU(b, rc)
				runCallersKeys(b, run.callers, run.keys, check)
				cpu1, calls1 := redisCPU(b, rc)
				b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "redis-µs/check")
				b.ReportMetric(float64(calls1-calls0)/float64(b.N), "calls/check")
			})
		}
	}
}

// redisCPU returns the server's CPU seconds so far (user and system) and
// the script calls it has run (EVAL and EVALSHA).
func redisCPU(b *testing.B, rc rueidis.Client) (float64, int64) {
	b.Helper()
	ctx := context.Background()
	info, err := rc.Do(ctx, rc.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	stats, err := rc.Do(ctx, rc.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var cpu float64
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		}
	}
	var calls int64
	for line := range strings.SplitSeq(stats, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "cmdstat_evalsha" || k == "cmdstat_eval" {
			n, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			c, _ := strconv.ParseInt(n, 10, 64)
			calls += c
		}
	}
	return cpu, calls
}
