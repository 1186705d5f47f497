package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// A huge cost on a policy with a huge limit is one sorted-set entry, not
// one per unit: the check returns at once and writes one member (besides
// the member holding the total).
func TestHugeCostIsOneEntry(t *testing.T) {
	t.Parallel()
	client := newClient(t)
	at := time.Unix(1_800_000_000, 0)
	s, err := redisstore.New(client, redisstore.Options{Prefix: testPrefix(t, client), Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 1 << 40
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingWindowLog, ratelimit.Concurrency} {
		p := &ratelimit.Policy{Name: "huge", Algorithm: alg, Limit: limit, Period: time.Hour}
		start := time.Now()
		d, err := s.Allow(t.Context(), p, "k", limit-1)
		if err != nil || !d.Allowed || d.Remaining != 1 {
			t.Fatalf("%s: Allow(cost 2^40-1) = %+v, %v; want allowed, 1 left", alg, d, err)
		}
		if d, _ := s.Allow(t.Context(), p, "k", 2); d.Allowed || d.RetryAfter != time.Hour {
			t.Errorf("%s: Allow(2) with 1 left = %+v, want refused for an hour", alg, d)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s: two checks of cost ~2^40 took %v, want well under a second", alg, took)
		}
		name := redisstore.KeyNameForTest(s, p, "k")
		n, err := client.Do(t.Context(), client.B().Zcount().Key(name).Min("(-inf").Max("+inf").Build()).AsInt64()
		if err != nil || n != 1 {
			t.Errorf("%s: %s holds %d entries (%v), want 1", alg, name, n, err)
		}
	}
}

// Every entry point refuses a cost its policy can never admit before any
// round trip: on a closed client the answer is still ErrCostExceedsLimit.
func TestCostExceedsLimitBeforeRedis(t *testing.T) {
	t.Parallel()
	client := enginetest.RedisClient(t, enginetest.RedisURL(t))
	client.Close() // every command now fails with rueidis.ErrClosing
	s, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bucket := &ratelimit.Policy{Name: "b", Algorithm: ratelimit.TokenBucket, Limit: 10, Period: time.Second}
	log := &ratelimit.Policy{Name: "l", Algorithm: ratelimit.SlidingWindowLog, Limit: 10, Period: time.Second}
	conc := &ratelimit.Policy{Name: "k", Algorithm: ratelimit.Concurrency, Limit: 10, Period: time.Second}
	ctx := t.Context()
	calls := map[string]func() error{
		"Allow": func() error { _, err := s.Allow(ctx, log, "k", 11); return err },
		"AllowMulti": func() error {
			_, err := s.AllowMulti(ctx, []ratelimit.Check{{Policy: bucket, Key: "a", Cost: 1}, {Policy: log, Key: "b", Cost: 11}})
			return err
		},
		"Reserve": func() error { _, err := s.Reserve(ctx, bucket, "k", 11, time.Hour); return err },
		"Acquire": func() error { _, _, err := s.Acquire(ctx, conc, "k", 11); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ratelimit.ErrCostExceedsLimit) {
			t.Errorf("%s(cost 11 of 10) = %v, want ErrCostExceedsLimit", name, err)
		}
	}
}
