package limits_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// TestFailoverConformance runs the store conformance suite over a Failover
// whose primary, a memory store, answers: the decorator must pass every
// call and answer through unchanged.
func TestFailoverConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Exercise(t, ratelimittest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) ratelimit.Store {
			return limits.NewFailover(limits.FailoverOptions{
				Primary: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: now}),
				Now:     now,
			})
		},
	})
}

// TestFailoverDownConformance runs the suite over a Failover whose primary
// never answers: with one node, the local store it falls back on must
// behave as any store.
func TestFailoverDownConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Exercise(t, ratelimittest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) ratelimit.Store {
			return limits.NewFailover(limits.FailoverOptions{Primary: downStore{}, Now: now})
		},
	})
}

var errDown = fmt.Errorf("dial redis: %w", ratelimit.ErrUnavailable)

// downStore is a primary that is always unreachable.
type downStore struct{}

func (downStore) Allow(context.Context, *ratelimit.Policy, string, int64) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errDown
}

func (downStore) AllowMulti(context.Context, []ratelimit.Check) ([]ratelimit.Decision, error) {
	return nil, errDown
}

func (downStore) Peek(context.Context, *ratelimit.Policy, string) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errDown
}

func (downStore) Reset(context.Context, *ratelimit.Policy, string) error { return errDown }

func (downStore) Reserve(context.Context, *ratelimit.Policy, string, int64, time.Duration) (ratelimit.Reservation, error) {
	return ratelimit.Reservation{}, errDown
}

func (downStore) CancelReservation(context.Context, ratelimit.Reservation) error { return errDown }

func (downStore) Acquire(context.Context, *ratelimit.Policy, string, int64) (ratelimit.Lease, ratelimit.Decision, error) {
	return ratelimit.Lease{}, ratelimit.Decision{}, errDown
}

func (downStore) Release(context.Context, ratelimit.Lease) error { return errDown }

func (downStore) Charge(context.Context, []ratelimit.Check) ([]ratelimit.Decision, error) {
	return nil, errDown
}

func (downStore) Hold(context.Context, string, []ratelimit.Check, ratelimit.UsageOptions) (ratelimit.Hold, error) {
	return ratelimit.Hold{}, errDown
}

func (downStore) Settle(context.Context, string, int64) (ratelimit.Settlement, error) {
	return ratelimit.Settlement{}, errDown
}
