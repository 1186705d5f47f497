package scale_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// keyPolicy is a per-user limit: 100 a day. A key whose bucket is full
// again holds no state (the stores drop it), so the period must outlast
// the fill: at 100 a minute a key checked once was full 0.6 s later, and
// most of 10 million keys were gone before they were counted.
var keyPolicy = ratelimit.Policy{Name: "scale", Algorithm: ratelimit.TokenBucket, Limit: 100, Period: 24 * time.Hour}

// measureKeys fills the memory store and a Redis of its own with
// -scale.keys keys and reports bytes per key and a check's p99 at that size.
func measureKeys(t *testing.T) string {
	n := max(1, scaled(*keys))
	var out strings.Builder
	fmt.Fprintf(&out, "\n## Rate limit keys (%d, token bucket 100/day)\n\n| store | bytes per key | check p50 / p99 at that size | fill rate |\n| --- | ---: | ---: | ---: |\n", n)

	mem := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
	before := heap()
	fill, took := fillKeys(t, mem, n)
	perKey := float64(heap()-before) / float64(n)
	h := checkLatency(t, mem, n)
	fmt.Fprintf(&out, "| memory | %.0f | %s / %s | %.0f keys/s |\n", perKey, ms(h.Quantile(0.5)), ms(h.Quantile(0.99)), float64(fill)/took.Seconds())
	runtime.KeepAlive(mem)

	redis := enginetest.StartRedis(t)
	c := enginetest.RedisClient(t, redis.URL(), enginetest.NoClientCache)
	rs, err := redisstore.New(c, redisstore.Options{Prefix: "scale:"})
	if err != nil {
		t.Fatal(err)
	}
	usedBefore := usedMemory(t, c)
	fill, took = fillKeys(t, rs, n)
	perKey = float64(usedMemory(t, c)-usedBefore) / float64(n)
	h = checkLatency(t, rs, n)
	fmt.Fprintf(&out, "| Redis (used_memory) | %.0f | %s / %s | %.0f keys/s |\n", perKey, ms(h.Quantile(0.5)), ms(h.Quantile(0.99)), float64(fill)/took.Seconds())
	return out.String()
}

// fillKeys checks every key once from 64 callers.
func fillKeys(t *testing.T, s ratelimit.Store, n int64) (int64, time.Duration) {
	ctx := context.Background()
	const callers = 64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	began := time.Now()
	for w := range int64(callers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := w; k < n; k += callers {
				if _, err := s.Allow(ctx, &keyPolicy, "user:"+strconv.FormatInt(k, 10), 1); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	select {
	case err := <-errs:
		t.Fatalf("fill keys: %v", err)
	default:
	}
	return n, took
}

// checkLatency times 20,000 checks of random existing keys, one at a time.
func checkLatency(t *testing.T, s ratelimit.Store, n int64) *bench.Histogram {
	ctx := context.Background()
	h := new(bench.Histogram)
	for i := range int64(20_000) {
		k := (i * 7_919_423) % n
		began := time.Now()
		if _, err := s.Allow(ctx, &keyPolicy, "user:"+strconv.FormatInt(k, 10), 1); err != nil {
			t.Fatalf("check: %v", err)
		}
		h.Record(time.Since(began))
	}
	return h
}

func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func usedMemory(t *testing.T, c rueidis.Client) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.Do(ctx, c.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		t.Fatalf("INFO memory: %v", err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("used_memory %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("INFO memory has no used_memory:\n%s", info)
	return 0
}
