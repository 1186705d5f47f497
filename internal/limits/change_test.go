package limits_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// cluster is two services sharing one rules database and one counter
// store (standing in for Redis), each with its own hot key cache, and an
// Announce func that records every change and delivers it to no one: the
// tests deliver it, so they see what a node does without it.
type cluster struct {
	clock *ratelimittest.Clock
	a, b  *node
	mu    sync.Mutex
	told  []limits.Change
}

type node struct {
	rules *limits.Rules
	svc   *limits.Service
	hot   *limits.HotKeys
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{clock: ratelimittest.NewClock(time.Unix(1_000_000, 0))}
	path := filepath.Join(t.TempDir(), "sluice.db")
	shared := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: c.clock.Now})
	announce := func(_ context.Context, ch limits.Change) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.told = append(c.told, ch)
		return nil
	}
	start := func() *node {
		rules, err := limits.NewRules(limits.RulesOptions{Store: openDB(t, path), Now: c.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		if err := rules.Load(t.Context()); err != nil {
			t.Fatal(err)
		}
		hot := limits.NewHotKeys(shared, 0, c.clock.Now)
		svc, err := limits.NewService(limits.Options{Rules: rules, Counters: hot, Announce: announce, Now: c.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		return &node{rules: rules, svc: svc, hot: hot}
	}
	c.a, c.b = start(), start()
	return c
}

// last returns the last change announced.
func (c *cluster) last(t *testing.T) limits.Change {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.told) == 0 {
		t.Fatal("nothing was announced")
	}
	return c.told[len(c.told)-1]
}

func (n *node) allowed(t *testing.T, policy, key string) bool {
	t.Helper()
	ok, _, err := n.svc.Check(t.Context(), []limits.CheckRequest{{Policy: policy, Key: key, Cost: 1}})
	if err != nil {
		t.Fatalf("Check(%s, %s): %v", policy, key, err)
	}
	return ok
}

var hourly = limits.NamedPolicy{Name: "hourly", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: limits.Period(time.Hour)}

// TestResetReachesEveryHotKeyCache: a key refused on A is remembered there
// until its retry time (an hour). Reset on B clears the shared counters
// and announces it; until A hears of it A still refuses from memory, and
// once it has, A admits at once.
func TestResetReachesEveryHotKeyCache(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := t.Context()
	if _, err := c.b.svc.PutPolicy(ctx, hourly); err != nil {
		t.Fatal(err)
	}
	if err := c.a.rules.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if !c.a.allowed(t, "hourly", "k") || c.a.allowed(t, "hourly", "k") {
		t.Fatal("A: want the first check allowed and the second refused")
	}
	if c.a.hot.Len() != 1 {
		t.Fatalf("A remembers %d refusals, want 1", c.a.hot.Len())
	}

	if err := c.b.svc.Reset(ctx, "hourly", "k"); err != nil {
		t.Fatalf("Reset on B: %v", err)
	}
	want := limits.Change{Kind: limits.KeyReset, Policy: "hourly", Key: "k"}
	if got := c.last(t); got != want {
		t.Fatalf("Reset announced %+v, want %+v", got, want)
	}
	if c.a.allowed(t, "hourly", "k") {
		t.Fatal("A admitted before hearing of the reset: its refusal was not answered from memory, so this test proves nothing")
	}
	c.a.svc.Heard(want)
	if !c.a.allowed(t, "hourly", "k") {
		t.Error("A refused the key after hearing of its reset on B")
	}
}

// TestPolicyChangeForgetsItsRefusals: a policy change is announced with
// the policy's name, and hearing it drops that policy's remembered
// refusals, and only them.
func TestPolicyChangeForgetsItsRefusals(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := t.Context()
	other := hourly
	other.Name = "other"
	for _, p := range []limits.NamedPolicy{hourly, other} {
		if _, err := c.b.svc.PutPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.a.rules.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"k1", "k2"} {
		for _, p := range []string{"hourly", "other"} {
			c.a.allowed(t, p, key)
			if c.a.allowed(t, p, key) {
				t.Fatalf("A admitted %s under %s twice at 1 per hour", key, p)
			}
		}
	}
	if c.a.hot.Len() != 4 {
		t.Fatalf("A remembers %d refusals, want 4", c.a.hot.Len())
	}

	raised := hourly
	raised.Limit = 5
	if _, err := c.b.svc.PutPolicy(ctx, raised); err != nil {
		t.Fatal(err)
	}
	want := limits.Change{Kind: limits.RulesChanged, Policy: "hourly"}
	if got := c.last(t); got != want {
		t.Fatalf("PutPolicy announced %+v, want %+v", got, want)
	}
	c.a.svc.Heard(want)
	if c.a.hot.Len() != 2 {
		t.Errorf("A remembers %d refusals after hearing of the change, want 2 (other's)", c.a.hot.Len())
	}
	if err := c.a.rules.Load(ctx); err != nil { // what the Invalidate Heard made asks Run to do
		t.Fatal(err)
	}
	if !c.a.allowed(t, "hourly", "k1") {
		t.Error("A refused k1 under the raised limit")
	}

	if _, err := c.b.svc.BlockKey(ctx, limits.BlockRequest{Key: "ip:1", Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got, want := c.last(t), (limits.Change{Kind: limits.RulesChanged}); got != want {
		t.Errorf("BlockKey announced %+v, want %+v", got, want)
	}
	if err := c.b.svc.DeletePolicy(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if got, want := c.last(t), (limits.Change{Kind: limits.RulesChanged, Policy: "other"}); got != want {
		t.Errorf("DeletePolicy announced %+v, want %+v", got, want)
	}
}

// TestHotKeysForgetPolicy: ForgetPolicy drops exactly the named policy's
// refusals.
func TestHotKeysForgetPolicy(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock(time.Unix(1000, 0))
	h := limits.NewHotKeys(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now}), 0, clock.Now)
	ctx := t.Context()
	ps := []ratelimit.Policy{
		{Name: "p", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: time.Hour},
		{Name: "q", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: time.Hour},
	}
	for i := range ps {
		for _, key := range []string{"a", "b"} {
			for range 2 {
				if _, err := h.Allow(ctx, &ps[i], key, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	h.ForgetPolicy("p")
	h.Forget("q", "a")
	h.Forget("q", "none") // absent: a no-op
	if h.Len() != 1 {
		t.Errorf("after ForgetPolicy(p) and Forget(q, a), %d refusals remembered, want 1 (q's b)", h.Len())
	}
}
