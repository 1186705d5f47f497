package limits_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// syncCounter counts the calls that reach the shared store.
type syncCounter struct {
	ratelimit.Store
	calls atomic.Int64
}

func (c *syncCounter) Allow(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Decision, error) {
	c.calls.Add(1)
	return c.Store.Allow(ctx, p, key, cost)
}

func (c *syncCounter) Peek(ctx context.Context, p *ratelimit.Policy, key string) (ratelimit.Decision, error) {
	c.calls.Add(1)
	return c.Store.Peek(ctx, p, key)
}

func newLocalSync(t *testing.T, maxKeys int) (*limits.LocalSync, *syncCounter, *ratelimittest.Clock) {
	t.Helper()
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
	shared := &syncCounter{Store: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now})}
	ls := limits.NewLocalSync(shared, limits.LocalSyncOptions{Now: clock.Now, MaxKeys: maxKeys,
		Interval: func(name string) time.Duration {
			if name == "local" {
				return 50 * time.Millisecond
			}
			return 0
		}})
	return ls, shared, clock
}

// A hot key costs the store one call when first seen and one per interval
// after, whatever the checks; what the node admitted reaches the store at
// the sync; a key idle for an interval is dropped; other policies pass
// through.
func TestLocalSyncCallsPerInterval(t *testing.T) {
	t.Parallel()
	ls, shared, clock := newLocalSync(t, 0)
	ctx := t.Context()
	p := &ratelimit.Policy{Name: "local", Algorithm: ratelimit.FixedWindow, Limit: 100, Period: time.Hour}
	admitted := 0
	for range 150 {
		d, err := ls.Allow(ctx, p, "hot", 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 100 || shared.calls.Load() != 1 {
		t.Fatalf("150 checks on a limit of 100 in one interval: %d admitted, %d store calls; want 100 and 1", admitted, shared.calls.Load())
	}
	if d, _ := ls.Allow(ctx, p, "hot", 1); d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 50*time.Millisecond {
		t.Errorf("local refusal = %+v, want refused until the next sync (≤ 50ms)", d)
	}
	clock.Advance(50 * time.Millisecond)
	ls.Sync(ctx)
	if n := shared.calls.Load(); n != 2 {
		t.Errorf("after one sync: %d store calls, want 2", n)
	}
	if d, _ := shared.Store.Peek(ctx, p, "hot"); d.Remaining != 0 {
		t.Errorf("store after the sync: Remaining %d, want 0 (every admitted check charged)", d.Remaining)
	}
	clock.Advance(50 * time.Millisecond)
	ls.Sync(ctx) // idle for the whole interval: dropped without a call
	if n, keys := shared.calls.Load(), ls.Len(); n != 2 || keys != 0 {
		t.Errorf("after an idle interval: %d store calls, %d keys tracked; want 2 and 0", n, keys)
	}
	exact := &ratelimit.Policy{Name: "exact", Algorithm: ratelimit.FixedWindow, Limit: 100, Period: time.Hour}
	for range 3 {
		if _, err := ls.Allow(ctx, exact, "k", 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := shared.calls.Load(); n != 5 {
		t.Errorf("3 checks of a policy without sync local: %d store calls in all, want 5", n)
	}
}

// At most MaxKeys keys are tracked; checks on more go to the store, exact.
func TestLocalSyncMaxKeys(t *testing.T) {
	t.Parallel()
	ls, shared, _ := newLocalSync(t, 2)
	ctx := t.Context()
	p := &ratelimit.Policy{Name: "local", Algorithm: ratelimit.TokenBucket, Limit: 10, Period: time.Hour}
	for _, k := range []string{"a", "b", "c", "c"} {
		if _, err := ls.Allow(ctx, p, k, 1); err != nil {
			t.Fatal(err)
		}
	}
	if ls.Len() != 2 || shared.calls.Load() != 4 {
		t.Errorf("4 checks on keys a, b, c, c with MaxKeys 2: %d tracked, %d store calls; want 2 and 4", ls.Len(), shared.calls.Load())
	}
}

// A reset drops the node's share, so the next check asks the store.
func TestLocalSyncReset(t *testing.T) {
	t.Parallel()
	ls, shared, _ := newLocalSync(t, 0)
	ctx := t.Context()
	p := &ratelimit.Policy{Name: "local", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: time.Hour}
	if d, _ := ls.Allow(ctx, p, "k", 1); !d.Allowed {
		t.Fatal("first check refused")
	}
	if err := ls.Reset(ctx, p, "k"); err != nil {
		t.Fatal(err)
	}
	if d, _ := ls.Allow(ctx, p, "k", 1); !d.Allowed || shared.calls.Load() != 2 {
		t.Errorf("check after a reset = %+v after %d store calls, want allowed by the store (2 calls)", d, shared.calls.Load())
	}
}

// What a node admitted in a fixed window that has ended is not charged to
// the next window: the first check after the window's end asks the store,
// which holds that check alone.
func TestLocalSyncWindowEnd(t *testing.T) {
	t.Parallel()
	ls, shared, clock := newLocalSync(t, 0)
	ctx := t.Context()
	p := &ratelimit.Policy{Name: "local", Algorithm: ratelimit.FixedWindow, Limit: 10, Period: time.Second}
	clock.Advance(900 * time.Millisecond)
	for range 5 {
		if d, _ := ls.Allow(ctx, p, "k", 1); !d.Allowed {
			t.Fatal("check in the first window refused")
		}
	}
	clock.Advance(150 * time.Millisecond) // into the next window
	if d, _ := ls.Allow(ctx, p, "k", 1); !d.Allowed || shared.calls.Load() != 2 {
		t.Fatalf("first check of the next window = %+v after %d store calls, want allowed by the store (2 calls)", d, shared.calls.Load())
	}
	ls.Sync(ctx)
	if d, _ := shared.Store.Peek(ctx, p, "k"); d.Remaining != 9 {
		t.Errorf("store after the sync: Remaining %d, want 9 (the new window's one check)", d.Remaining)
	}
}

// The cost of a check decided locally (a key this node tracks), beside the
// same check on the memory store it fronts. docs/benchmarks.md has figures:
//
//	go test -run '^$' -bench BenchmarkLocalSync -benchtime 1s ./internal/limits/
func BenchmarkLocalSync(b *testing.B) {
	mem := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
	ls := limits.NewLocalSync(mem, limits.LocalSyncOptions{Interval: func(string) time.Duration { return time.Hour }})
	p := &ratelimit.Policy{Name: "local", Algorithm: ratelimit.TokenBucket, Limit: 1_000_000_000, Period: time.Second}
	ctx := context.Background()
	for _, s := range []struct {
		name  string
		store ratelimit.Store
	}{{"local", ls}, {"memory", mem}} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d, err := s.store.Allow(ctx, p, "hot", 1); err != nil || !d.Allowed {
						b.Fatalf("Allow = %+v, %v", d, err)
					}
				}
			})
		})
	}
}
