package announce_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/announce"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// ruleNode is one in-process rate limit service with its own connections.
type ruleNode struct {
	svc *limits.Service
}

func startRuleNode(t *testing.T, dbPath, natsURL, prefix string) *ruleNode {
	t.Helper()
	ctx := t.Context()
	db, q := nodeConns(t, dbPath, natsURL, prefix)
	// A refresh far longer than the test: only the announcement can make
	// the other node see a change in time.
	rules, err := limits.NewRules(limits.RulesOptions{Store: db, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := rules.Load(ctx); err != nil {
		t.Fatal(err)
	}
	bus := announce.New(q.NATS(), q.Name("ratelimit.rules.changed"))
	stop, err := bus.Listen(func(string) { rules.Invalidate() })
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rules.Run(runCtx) }()
	t.Cleanup(func() { _ = stop(); cancel(); <-done })
	svc, err := limits.NewService(limits.Options{Rules: rules,
		Announce: func(ctx context.Context, _ limits.Change) error { return bus.Signal(ctx) },
		Counters: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	return &ruleNode{svc: svc}
}

// TestChangesReachTheOtherNodeWithinASecond: two services sharing one
// rules database and one NATS server; a policy change and a block made
// through one are enforced by the other at once: milliseconds when quiet
// (the waits allow 20 s, for a loaded machine, and log the time).
func TestChangesReachTheOtherNodeWithinASecond(t *testing.T) {
	t.Parallel()
	nats := enginetest.StartNATS(t)
	dbPath := filepath.Join(t.TempDir(), "sluice.db")
	a := startRuleNode(t, dbPath, nats.URL(), "")
	b := startRuleNode(t, dbPath, nats.URL(), "")
	ctx := t.Context()

	p := limits.NamedPolicy{Name: "burst", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: limits.Period(time.Hour)}
	if _, err := a.svc.PutPolicy(ctx, p); err != nil {
		t.Fatal(err)
	}
	took := enginetest.Eventually(t, 20*time.Second, "the new policy on the other ruleNode", func() bool {
		_, _, err := b.svc.Policy("burst")
		return err == nil
	})
	t.Logf("policy created on A served by B after %v", took)

	if _, err := a.svc.BlockKey(ctx, limits.BlockRequest{Key: "ip:6", Duration: time.Minute, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	took = enginetest.Eventually(t, 20*time.Second, "the block on the other ruleNode", func() bool {
		ok, rs, err := b.svc.Check(ctx, []limits.CheckRequest{{Policy: "free", Key: "ip:6", Cost: 1}})
		return err == nil && !ok && rs[0].DecidedBy == limits.ByBlock
	})
	t.Logf("block made on A enforced by B after %v", took)

	p.Limit = 7
	if _, err := a.svc.PutPolicy(ctx, p); err != nil {
		t.Fatal(err)
	}
	took = enginetest.Eventually(t, 20*time.Second, "the changed limit on the other ruleNode", func() bool {
		_, rs, err := b.svc.Check(ctx, []limits.CheckRequest{{Policy: "burst", Key: "k", Cost: 1}})
		return err == nil && rs[0].Limit == 7
	})
	t.Logf("policy change on A enforced by B after %v", took)
}
