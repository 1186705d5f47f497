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
)

// TestFailoverWithoutPrimaryUntilSet starts a Failover with no Primary, as
// a node started while Redis is down does: it decides locally at limit /
// nodes and reports the store down, its prober idles, and SetPrimary
// switches it to the shared store at once.
func TestFailoverWithoutPrimaryUntilSet(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	logs := &enginetest.LogBuffer{}
	f := limits.NewFailover(limits.FailoverOptions{Nodes: 2, ProbeInterval: time.Millisecond,
		FailsClosed: func(name string) bool { return name == "closed" },
		Metrics:     metrics.NewLimits(reg), Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(ctx) }() // probes with no Primary: must not panic
	t.Cleanup(func() { cancel(); <-done })

	open := ratelimit.Policy{Name: "open", Algorithm: ratelimit.FixedWindow, Limit: 10, Period: time.Hour}
	closed := ratelimit.Policy{Name: "closed", Algorithm: ratelimit.FixedWindow, Limit: 10, Period: time.Hour}
	allow := func(p *ratelimit.Policy) ratelimit.Decision {
		t.Helper()
		d, err := f.Allow(t.Context(), p, "k", 1)
		if err != nil {
			t.Fatalf("Allow(%s) = %v, want no error without a Primary", p.Name, err)
		}
		return d
	}
	if f.Up() || storeUp(t, reg) != 0 {
		t.Fatalf("Failover without a Primary: Up() = %v, store_up %v; want down, 0", f.Up(), storeUp(t, reg))
	}
	if d := allow(&open); !d.Allowed || d.Limit != 5 || d.Remaining != 4 {
		t.Errorf("check without a Primary = %+v, want allowed locally at 10/2: limit 5, 4 left", d)
	}
	if d := allow(&closed); d.Allowed {
		t.Errorf("fail-closed policy without a Primary = %+v, want refused", d)
	}
	if _, err := f.AllowMulti(t.Context(), []ratelimit.Check{{Policy: &open, Key: "m", Cost: 1}}); err != nil {
		t.Errorf("AllowMulti without a Primary = %v, want decided locally", err)
	}

	shared := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
	f.SetPrimary(shared)
	if !f.Up() || storeUp(t, reg) != 1 {
		t.Fatalf("after SetPrimary: Up() = %v, store_up %v; want up, 1", f.Up(), storeUp(t, reg))
	}
	if d := allow(&open); d.Limit != 10 || d.Remaining != 9 {
		t.Errorf("check after SetPrimary = %+v, want the shared store's fresh counter (10, 9 left)", d)
	}
	if d, _ := shared.Peek(t.Context(), &open, "k"); d.Remaining != 9 {
		t.Errorf("shared store after one check = %+v, want it counted there (9 left)", d)
	}
	if n := strings.Count(logs.String(), "rate limit store connected"); n != 1 {
		t.Errorf("logged the connection %d times, want once:\n%s", n, logs)
	}
}
