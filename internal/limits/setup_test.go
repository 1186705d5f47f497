package limits_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// bundle is one service on a fresh SQLite rules store and a memory counter
// store, both on a test clock.
type bundle struct {
	db      *store.DB
	rules   *limits.Rules
	svc     *limits.Service
	clock   *ratelimittest.Clock
	counter *ratelimit.MemoryStore
}

type setupOpts struct {
	config   []limits.NamedPolicy
	counters func(*ratelimittest.Clock) ratelimit.Store
}

func openDB(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), store.Options{URL: "sqlite:" + path})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return db
}

func setup(t *testing.T, o setupOpts) *bundle {
	t.Helper()
	b := &bundle{clock: ratelimittest.NewClock(time.Unix(1_000_000, 0))}
	b.db = openDB(t, filepath.Join(t.TempDir(), "sluice.db"))
	var err error
	b.rules, err = limits.NewRules(limits.RulesOptions{Store: b.db, Config: o.config, Now: b.clock.Now})
	if err != nil {
		t.Fatalf("NewRules: %v", err)
	}
	if err := b.rules.Load(t.Context()); err != nil {
		t.Fatalf("Load: %v", err)
	}
	var counters ratelimit.Store
	if o.counters != nil {
		counters = o.counters(b.clock)
	} else {
		b.counter = ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: b.clock.Now})
		counters = b.counter
	}
	b.svc, err = limits.NewService(limits.Options{Rules: b.rules, Counters: counters, Now: b.clock.Now})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return b
}

func (b *bundle) put(t *testing.T, p limits.NamedPolicy) {
	t.Helper()
	if _, err := b.svc.PutPolicy(context.Background(), p); err != nil {
		t.Fatalf("PutPolicy(%s): %v", p.Name, err)
	}
}

func (b *bundle) check(t *testing.T, reqs ...limits.CheckRequest) (bool, []limits.Result) {
	t.Helper()
	ok, rs, err := b.svc.Check(context.Background(), reqs)
	if err != nil {
		t.Fatalf("Check(%+v): %v", reqs, err)
	}
	return ok, rs
}

func one(policy, key string) limits.CheckRequest {
	return limits.CheckRequest{Policy: policy, Key: key, Cost: 1}
}

func perMinute(name string, alg ratelimit.Algorithm, n int64) limits.NamedPolicy {
	return limits.NamedPolicy{Name: name, Algorithm: alg, Limit: n, Period: limits.Period(time.Minute)}
}
