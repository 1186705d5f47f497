package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// Checks per second and latency at 1, 16 and 64 concurrent callers against
// the test Redis, beside github.com/go-redis/redis_rate/v10 on the same
// server, and the same one-check script call through rueidis and go-redis
// (the client choice). Every check is a token bucket check that is
// allowed, on one of 10,000 keys. Results and the commands are in
// docs/benchmarks.md.
//
//	SLUICE_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench BenchmarkRedis -benchtime 2s ./ratelimit/redisstore/

var benchCallers = []int{1, 16, 64}

const benchKeys = 10_000

// runCallers runs b.N checks from callers goroutines and reports checks/s
// and the latency percentiles of one check.
func runCallers(b *testing.B, callers int, check func(ctx context.Context, key string) error) {
	b.Helper()
	runCallersKeys(b, callers, benchKeys, check)
}

// runCallersKeys is runCallers over nkeys keys.
func runCallersKeys(b *testing.B, callers, nkeys int, check func(ctx context.Context, key string) error) {
	b.Helper()
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	ctx := context.Background()
	lat := make([][]time.Duration, callers)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for g := range callers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := check(ctx, keys[r.IntN(len(keys))]); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "checks/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkRedis(b *testing.B) {
	url := enginetest.RedisURL(b)
	rc := enginetest.RedisClient(b, url)
	gopt, err := goredis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	gopt.PoolSize = 64
	gc := goredis.NewClient(gopt)
	defer gc.Close()

	policy := &ratelimit.Policy{Name: "bench", Algorithm: ratelimit.TokenBucket, Limit: 1_000_000, Period: time.Second}
	rrLimit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}

	for _, callers := range benchCallers {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			b.Run("impl=sluice", func(b *testing.B) {
				s, err := redisstore.New(rc, redisstore.Options{Prefix: testPrefix(b, rc)})
				if err != nil {
					b.Fatal(err)
				}
				runCallers(b, callers, func(ctx context.Context, key string) error {
					d, err := s.Allow(ctx, policy, key, 1)
					if err == nil && !d.Allowed {
						err = fmt.Errorf("refused: %+v", d)
					}
					return err
				})
			})
			b.Run("impl=sluice-unbatched", func(b *testing.B) {
				// One script call per check, pipelined by rueidis: what
				// coalescing adds.
				s, err := redisstore.New(rc, redisstore.Options{Prefix: testPrefix(b, rc), MaxBatch: 1, MaxInFlight: 1024})
				if err != nil {
					b.Fatal(err)
				}
				runCallers(b, callers, func(ctx context.Context, key string) error {
					_, err := s.Allow(ctx, policy, key, 1)
					return err
				})
			})
			b.Run("impl=redis_rate", func(b *testing.B) {
				l := redis_rate.NewLimiter(gc)
				prefix := testPrefix(b, rc)
				runCallers(b, callers, func(ctx context.Context, key string) error {
					res, err := l.Allow(ctx, prefix+key, rrLimit)
					if err == nil && res.Allowed == 0 {
						err = fmt.Errorf("refused: %+v", res)
					}
					return err
				})
			})
			// The client choice: the same single-check script call.
			sha, args := redisstore.ScriptForBench()
			b.Run("client=rueidis", func(b *testing.B) {
				prefix := testPrefix(b, rc)
				runCallers(b, callers, func(ctx context.Context, key string) error {
					return rc.Do(ctx, rc.B().Evalsha().Sha1(sha).Numkeys(1).Key(prefix+"{"+key+"}:bench:b").Arg(args...).Build()).Error()
				})
			})
			b.Run("client=go-redis", func(b *testing.B) {
				prefix := testPrefix(b, rc)
				iargs := make([]any, len(args))
				for i, a := range args {
					iargs[i] = a
				}
				runCallers(b, callers, func(ctx context.Context, key string) error {
					return gc.EvalSha(ctx, sha, []string{prefix + "{" + key + "}:bench:b"}, iargs...).Err()
				})
			})
		})
	}
}

// Checks per second of one key and of three keys in three Cluster slots,
// on the test Redis and on a 3-master Cluster the benchmark starts, all
// three on this machine; on the Cluster also three keys sharing one slot
// through Options.HashTag. Every check is allowed. Results and the command
// are in docs/benchmarks.md.
//
//	SLUICE_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench BenchmarkRedisCluster -benchtime 2s ./ratelimit/redisstore/
func BenchmarkRedisCluster(b *testing.B) {
	standalone := newClient(b)
	cluster := newClusterClient(b)
	policy := &ratelimit.Policy{Name: "bench", Algorithm: ratelimit.TokenBucket, Limit: 1_000_000, Period: time.Second}
	servers := []struct {
		name    string
		client  rueidis.Client
		hashTag func(string) string
	}{
		{"standalone", standalone, nil},
		{"cluster", cluster, nil},
		{"cluster-hashtag", cluster, func(key string) string { k, _, _ := strings.Cut(key, "/"); return k }},
	}
	for _, srv := range servers {
		for _, keys := range []int{1, 3} {
			if keys == 1 && srv.hashTag != nil {
				continue
			}
			for _, callers := range benchCallers {
				b.Run(fmt.Sprintf("server=%s/keys=%d/callers=%d", srv.name, keys, callers), func(b *testing.B) {
					prefix := clusterPrefix()
					if srv.client == standalone {
						prefix = testPrefix(b, standalone) // the shared server: delete the keys afterwards
					}
					s, err := redisstore.New(srv.client, redisstore.Options{Prefix: prefix, HashTag: srv.hashTag})
					if err != nil {
						b.Fatal(err)
					}
					runCallers(b, callers, func(ctx context.Context, key string) error {
						checks := []ratelimit.Check{{Policy: policy, Key: key, Cost: 1}, {Policy: policy, Key: key + "/2", Cost: 1}, {Policy: policy, Key: key + "/3", Cost: 1}}
						ok, ds, err := ratelimit.AllowAll(ctx, s, checks[:keys])
						if err == nil && !ok {
							err = fmt.Errorf("refused: %+v", ds)
						}
						return err
					})
				})
			}
		}
	}
}
