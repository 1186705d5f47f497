package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PolicyLimiter applies one policy on one store. It implements Limiter and
// is safe for concurrent use; its zero value is not usable (use
// NewPolicyLimiter).
type PolicyLimiter struct {
	store  Store
	policy *Policy
}

var _ Limiter = (*PolicyLimiter)(nil)

// NewPolicyLimiter validates p and returns a limiter applying it on store.
func NewPolicyLimiter(store Store, p Policy) (*PolicyLimiter, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &PolicyLimiter{store: store, policy: &p}, nil
}

// Policy returns the limiter's policy.
func (l *PolicyLimiter) Policy() Policy { return *l.policy }

// Check returns the Check of key and cost under this limiter's policy, for
// AllowAll.
func (l *PolicyLimiter) Check(key string, cost int64) Check {
	return Check{Policy: l.policy, Key: key, Cost: cost}
}

// Allow checks key and consumes cost if allowed. On a concurrency policy it
// takes slots that are freed only when they expire, one Period later; use
// Acquire to release them sooner.
func (l *PolicyLimiter) Allow(ctx context.Context, key string, cost int64) (Decision, error) {
	return l.store.Allow(ctx, l.policy, key, cost)
}

// Peek returns key's state without consuming.
func (l *PolicyLimiter) Peek(ctx context.Context, key string) (Decision, error) {
	return l.store.Peek(ctx, l.policy, key)
}

// Reset forgets key's state: it gets its full allowance back.
func (l *PolicyLimiter) Reset(ctx context.Context, key string) error {
	return l.store.Reset(ctx, l.policy, key)
}

// Acquire takes cost slots of a concurrency policy. When allowed, release
// the lease when the work is done.
func (l *PolicyLimiter) Acquire(ctx context.Context, key string, cost int64) (Lease, Decision, error) {
	return l.store.Acquire(ctx, l.policy, key, cost)
}

// Release frees a lease taken by Acquire.
func (l *PolicyLimiter) Release(ctx context.Context, lease Lease) error {
	return l.store.Release(ctx, lease)
}

// Reserve takes cost now if the wait before acting is at most maxWait
// (token_bucket and gcra only). The caller must wait r.Delay before acting,
// or cancel with CancelReservation.
func (l *PolicyLimiter) Reserve(ctx context.Context, key string, cost int64, maxWait time.Duration) (Reservation, error) {
	return l.store.Reserve(ctx, l.policy, key, cost, maxWait)
}

// CancelReservation gives r's capacity back if its time has not come.
func (l *PolicyLimiter) CancelReservation(ctx context.Context, r Reservation) error {
	return l.store.CancelReservation(ctx, r)
}

// ErrWaitExceedsDeadline is returned by Wait when the wait would outlast
// the context's deadline; nothing is consumed then.
var ErrWaitExceedsDeadline = errors.New("rate limit wait would exceed the context deadline")

// Wait blocks until cost may be spent on key, taking it, like
// x/time/rate's WaitN. It returns at once with ErrWaitExceedsDeadline when
// the wait would outlast ctx's deadline, and gives the capacity back when
// ctx ends while waiting.
func (l *PolicyLimiter) Wait(ctx context.Context, key string, cost int64) error {
	maxWait := time.Duration(maxExact) * time.Microsecond
	if dl, ok := ctx.Deadline(); ok {
		maxWait = time.Until(dl)
	}
	r, err := l.Reserve(ctx, key, cost, maxWait)
	if err != nil {
		return err
	}
	if !r.OK {
		return fmt.Errorf("%w: would wait %v", ErrWaitExceedsDeadline, r.Decision.RetryAfter)
	}
	if r.Delay <= 0 {
		return nil
	}
	t := time.NewTimer(r.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		// The reservation is ours to return; a caller's ctx is done, so use
		// one that is not.
		_ = l.store.CancelReservation(context.WithoutCancel(ctx), r)
		return ctx.Err()
	}
}
