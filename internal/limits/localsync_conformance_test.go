package limits_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// syncedEveryStep is a LocalSync synced before and after every operation,
// on one node: the limit of an ever shorter interval. Its decisions must
// then be the store's, except where a local refusal says when to retry.
type syncedEveryStep struct {
	*limits.LocalSync
}

func (s syncedEveryStep) Allow(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Decision, error) {
	limits.SyncAllForTest(ctx, s.LocalSync)
	d, err := s.LocalSync.Allow(ctx, p, key, cost)
	limits.SyncAllForTest(ctx, s.LocalSync)
	return d, err
}

func (s syncedEveryStep) Peek(ctx context.Context, p *ratelimit.Policy, key string) (ratelimit.Decision, error) {
	limits.SyncAllForTest(ctx, s.LocalSync)
	return s.LocalSync.Peek(ctx, p, key)
}

func (s syncedEveryStep) AllowMulti(ctx context.Context, checks []ratelimit.Check) ([]ratelimit.Decision, error) {
	limits.SyncAllForTest(ctx, s.LocalSync)
	return s.LocalSync.AllowMulti(ctx, checks)
}

// TestLocalSyncConformance runs the store conformance suite over LocalSync
// in front of a memory store, every policy in local mode, synced at every
// step.
func TestLocalSyncConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Exercise(t, ratelimittest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) ratelimit.Store {
			mem := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: now})
			return syncedEveryStep{limits.NewLocalSync(mem, limits.LocalSyncOptions{
				Interval: func(string) time.Duration { return 50 * time.Millisecond }, Now: now})}
		},
		// The documented tolerance (docs/ratelimit.md, "Local sync"): a
		// refusal decided locally says to retry at the next sync, when the
		// node may learn of allowance come back, not when the store would
		// admit; a bucket's ResetAfter after local checks adds each
		// check's refill time rounded up to the µs. Allowed and Remaining
		// stay exact at every step.
		Skip: map[string]string{
			"RandomAgainstSimulate": "a local refusal's RetryAfter is the time to the next sync; a local bucket check's ResetAfter may be 1 µs longer",
			"RefusalChargesNothing": "it waits the RetryAfter of a local refusal (the next sync), after which the store still refuses",
			"RetryAfter":            "a local refusal's RetryAfter is the time to the next sync",
			"BucketSequence":        "a local refusal's RetryAfter is the time to the next sync",
		},
	})
}
