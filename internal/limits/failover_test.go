package limits_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// TestFailoverToLocalAndBack stops a private Redis under a Failover store:
// checks keep answering at once (limit / nodes, or refused for a
// fail-closed policy), the gauge drops and one line is logged; when Redis
// is back the store returns to it by itself.
func TestFailoverToLocalAndBack(t *testing.T) {
	t.Parallel()
	redis := enginetest.StartRedis(t)
	client := enginetest.RedisClient(t, redis.URL(), enginetest.NoClientCache)
	primary, err := redisstore.New(client, redisstore.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	hooks := metrics.NewLimits(reg)
	logs := &enginetest.LogBuffer{}
	f := limits.NewFailover(limits.FailoverOptions{Primary: primary, Nodes: 2, Timeout: 200 * time.Millisecond,
		ProbeInterval: 20 * time.Millisecond, FailsClosed: func(name string) bool { return name == "closed" },
		Metrics: hooks, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	open := ratelimit.Policy{Name: "open", Algorithm: ratelimit.FixedWindow, Limit: 10, Period: time.Hour}
	closed := ratelimit.Policy{Name: "closed", Algorithm: ratelimit.FixedWindow, Limit: 10, Period: time.Hour}
	allow := func(p *ratelimit.Policy) ratelimit.Decision {
		t.Helper()
		start := time.Now()
		d, err := f.Allow(t.Context(), p, "k", 1)
		if err != nil {
			t.Fatalf("Allow(%s) = %v; want no error whatever the store does", p.Name, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Allow(%s) took %v, want well under a second", p.Name, took)
		}
		return d
	}
	for range 3 {
		allow(&open)
	}
	if d := allow(&open); d.Remaining != 6 || !f.Up() {
		t.Fatalf("4th check on Redis = %+v, want 6 left of 10", d)
	}

	redis.Stop()
	if d := allow(&open); !d.Allowed || d.Limit != 5 || d.Remaining != 4 || f.Up() {
		t.Errorf("first check with Redis down = %+v (up %v), want allowed locally at 10/2: limit 5, 4 left", d, f.Up())
	}
	if d := allow(&closed); d.Allowed {
		t.Errorf("fail-closed policy with Redis down = %+v, want refused", d)
	}
	for range 4 {
		allow(&open)
	}
	if d := allow(&open); d.Allowed {
		t.Errorf("6th local check = %+v, want refused at this node's share (5)", d)
	}
	if g := storeUp(t, reg); g != 0 {
		t.Errorf("sluice_ratelimit_store_up = %v with Redis down, want 0", g)
	}
	if n := strings.Count(logs.String(), "rate limit store unreachable"); n != 1 {
		t.Errorf("logged the outage %d times, want once", n)
	}

	redis.Start()
	enginetest.Eventually(t, 15*time.Second, "the store to return to Redis", f.Up)
	if d := allow(&open); d.Limit != 10 || d.Remaining != 9 {
		t.Errorf("check after Redis came back = %+v, want Redis's fresh counter (10, 9 left)", d)
	}
	if g := storeUp(t, reg); g != 1 {
		t.Errorf("sluice_ratelimit_store_up = %v after recovery, want 1", g)
	}
	if n := strings.Count(logs.String(), "answers again"); n != 1 {
		t.Errorf("logged the recovery %d times, want once", n)
	}
}

func storeUp(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_ratelimit_store_up" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("sluice_ratelimit_store_up not registered")
	return 0
}

func TestHotKeysAnswerRefusedKeysLocally(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock(time.Unix(1000, 0))
	mem := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now})
	counting := &countingStore{Store: mem}
	h := limits.NewHotKeys(counting, 2, clock.Now)
	p := ratelimit.Policy{Name: "p", Algorithm: ratelimit.TokenBucket, Limit: 1, Period: 2 * time.Second}
	ctx := t.Context()
	if d, _ := h.Allow(ctx, &p, "k", 1); !d.Allowed {
		t.Fatal("first check refused")
	}
	d1, _ := h.Allow(ctx, &p, "k", 1)
	calls := counting.calls
	clock.Advance(500 * time.Millisecond)
	d2, _ := h.Allow(ctx, &p, "k", 1)
	if d1.Allowed || d2.Allowed || d2.RetryAfter != 1500*time.Millisecond || counting.calls != calls {
		t.Errorf("refused key: %+v then %+v with %d store calls, want the second answered locally, retry after 1.5s", d1, d2, counting.calls-calls)
	}
	clock.Advance(1500 * time.Millisecond)
	if d, _ := h.Allow(ctx, &p, "k", 1); !d.Allowed || counting.calls != calls+1 {
		t.Errorf("after the retry time: %+v, want allowed by the store", d)
	}
	// Bounded: at most 2 remembered, whatever the number of refused keys.
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		h.Allow(ctx, &p, k, 1)
		h.Allow(ctx, &p, k, 1)
	}
	if n := h.Len(); n > 2 {
		t.Errorf("HotKeys holds %d keys, want at most 2", n)
	}
	// Reset forgets the refusal.
	h.Allow(ctx, &p, "e", 1)
	if err := h.Reset(ctx, &p, "e"); err != nil {
		t.Fatal(err)
	}
	if d, _ := h.Allow(ctx, &p, "e", 1); !d.Allowed {
		t.Errorf("after Reset: %+v, want allowed", d)
	}
}

// countingStore counts the checks that reach the store.
type countingStore struct {
	ratelimit.Store
	calls int
}

func (c *countingStore) Allow(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Decision, error) {
	c.calls++
	return c.Store.Allow(ctx, p, key, cost)
}
