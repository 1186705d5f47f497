package redisstore_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// Usage reservations against a plain check, in one run: a reserve and its
// settle are two operations (three Redis calls: the reserve script, then
// the settle's read and script), a plain check one. Each op is a token
// bucket on one of 10,000 keys, always allowed; reported per second at 1
// and 16 callers on the memory store and on the test Redis. Results and
// the command are in docs/benchmarks.md.
//
//	SLUICE_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench BenchmarkUsage -benchtime 2s ./ratelimit/redisstore/
func BenchmarkUsage(b *testing.B) {
	client := newClient(b)
	rs, err := redisstore.New(client, redisstore.Options{Prefix: testPrefix(b, client)})
	if err != nil {
		b.Fatal(err)
	}
	stores := []struct {
		name  string
		store ratelimit.Store
	}{
		{"memory", ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})},
		{"redis", rs},
	}
	p := &ratelimit.Policy{Name: "bench", Algorithm: ratelimit.TokenBucket, Limit: 1_000_000_000, Period: time.Second}
	for _, st := range stores {
		us := st.store.(ratelimit.UsageStore)
		for _, callers := range []int{1, 16} {
			b.Run(st.name+"/check/callers="+strconv.Itoa(callers), func(b *testing.B) {
				runCallers(b, callers, func(ctx context.Context, key string) error {
					_, err := st.store.Allow(ctx, p, key, 1)
					return err
				})
			})
			b.Run(st.name+"/reserve+settle/callers="+strconv.Itoa(callers), func(b *testing.B) {
				runCallers(b, callers, func(ctx context.Context, key string) error {
					h, err := us.Hold(ctx, rand.Text(), []ratelimit.Check{{Policy: p, Key: key, Cost: 10}}, ratelimit.UsageOptions{})
					if err != nil {
						return err
					}
					_, err = us.Settle(ctx, h.ID, 7)
					return err
				})
			})
		}
	}
}
