package envoyrls_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// countingStore counts the checks that reach the shared store.
type countingStore struct {
	ratelimit.Store
	checks atomic.Int64
}

func (c *countingStore) Allow(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Decision, error) {
	c.checks.Add(1)
	return c.Store.Allow(ctx, p, key, cost)
}

func (c *countingStore) AllowMulti(ctx context.Context, checks []ratelimit.Check) ([]ratelimit.Decision, error) {
	c.checks.Add(1)
	return c.Store.AllowMulti(ctx, checks)
}

const localSyncYAML = `domain: edge
descriptors:
  - key: local
    rate_limit: {unit: minute, requests_per_unit: 100, sync: local, sync_interval: 200ms}
  - key: exact
    rate_limit: {unit: minute, requests_per_unit: 100}
`

// An Envoy rule with sync: local is decided from the node's share: its
// checks do not reach Redis one by one, what it admits reaches Redis at
// the next sync, and it still refuses past its limit. A rule without it
// sends every check to the store. A reload that drops sync: local sends
// the rule's checks to the store again.
func TestEnvoyRuleSyncLocal(t *testing.T) {
	t.Parallel()
	clk := newClock()
	shared := &countingStore{Store: redisStores(t, 1, clk.Now)[0]}
	var srv atomic.Pointer[envoyrls.Server]
	local := limits.NewLocalSync(shared, limits.LocalSyncOptions{Now: clk.Now, Interval: func(p string) time.Duration {
		if s := srv.Load(); s != nil {
			return s.SyncInterval(p)
		}
		return 0
	}})
	cfg, err := envoyrls.Parse(map[string][]byte{"edge.yaml": []byte(localSyncYAML)})
	if err != nil {
		t.Fatal(err)
	}
	b := serve(t, cfg, envoyrls.Options{Store: local, Now: clk.Now})
	srv.Store(b.server)

	over := func(key string, n int) (allowed int) {
		for range n {
			if b.call(t, req("edge", desc(key, "k"))).OverallCode == rlspb.RateLimitResponse_OK {
				allowed++
			}
		}
		return allowed
	}
	if got := over("local", 150); got != 100 {
		t.Errorf("sync: local rule admitted %d of 150, want its limit 100", got)
	}
	if got := shared.checks.Load(); got > 2 {
		t.Errorf("sync: local rule sent %d checks to the store for 150 requests, want at most 2 (the first, then syncs)", got)
	}
	before := shared.checks.Load()
	clk.Advance(250 * time.Millisecond)
	local.Sync(context.Background())
	if shared.checks.Load() == before {
		t.Error("a sync sent nothing to the store after the rule admitted requests locally")
	}

	before = shared.checks.Load()
	if got := over("exact", 30); got != 30 {
		t.Errorf("rule without sync admitted %d of 30", got)
	}
	if got := shared.checks.Load() - before; got != 30 {
		t.Errorf("rule without sync sent %d checks to the store for 30 requests, want 30", got)
	}

	cfg2, err := envoyrls.Parse(map[string][]byte{"edge.yaml": []byte(`domain: edge
descriptors:
  - key: local
    rate_limit: {unit: minute, requests_per_unit: 100}
`)})
	if err != nil {
		t.Fatal(err)
	}
	b.server.SetConfig(cfg2)
	before = shared.checks.Load()
	over("local", 5)
	if got := shared.checks.Load() - before; got != 5 {
		t.Errorf("after a reload without sync: local, 5 requests sent %d checks to the store, want 5", got)
	}
}
