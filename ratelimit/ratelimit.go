package ratelimit

import (
	"context"
	"time"
)

// Decision is the answer to one check.
type Decision struct {
	Allowed bool
	// Limit is the policy's capacity: Burst for token_bucket and gcra, Limit
	// otherwise.
	Limit int64
	// Remaining is the allowance left after this check (never negative).
	Remaining int64
	// RetryAfter is zero when allowed; otherwise how long until the same
	// request would be allowed if nothing else consumed meanwhile.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to its full allowance.
	ResetAfter time.Duration
}

// Limiter is what callers of a rate limit depend on.
type Limiter interface {
	Allow(ctx context.Context, key string, cost int64) (Decision, error)
}

// Check is one (policy, key, cost) triple of a multi-key check.
type Check struct {
	Policy *Policy
	Key    string
	Cost   int64
	// Fixed, in a usage reservation (ReserveUsage), marks a check whose
	// cost is final: settling does not replace it (the request count beside
	// a token budget). Other operations ignore it.
	Fixed bool
}

// Reservation is capacity taken now for use after Delay.
type Reservation struct {
	// OK reports whether the capacity was taken. It is false when the wait
	// would have exceeded the maximum asked for; nothing is consumed then.
	OK bool
	// Delay is how long to wait before acting (zero: act now).
	Delay time.Duration
	// Decision describes the key after the reservation. When OK is false,
	// its RetryAfter is the wait the reservation would have needed.
	Decision Decision
	Policy   *Policy
	Key      string
	Cost     int64
	// Until is the store's clock at the end of Delay, in Unix microseconds.
	// CancelReservation returns the capacity only before it.
	Until int64
}

// Lease is a concurrency slot held until Release (or until it expires one
// Period after it was taken).
type Lease struct {
	Policy *Policy
	Key    string
	ID     string
	Cost   int64
}

// Store keeps rate limit state and applies each operation atomically. It is
// the seam between the algorithms and where their state lives; the
// conformance suite in package ratelimittest pins its behaviour, and every
// implementation must pass it. Callers normally use PolicyLimiter and
// AllowAll rather than a Store directly.
type Store interface {
	// Allow checks one key against one policy and consumes cost if allowed.
	Allow(ctx context.Context, p *Policy, key string, cost int64) (Decision, error)
	// AllowMulti checks every check and consumes from all of them only if
	// all allow. It returns one Decision per check, in order; when any is
	// refused nothing is consumed and each Decision says whether its own
	// check would have passed.
	AllowMulti(ctx context.Context, checks []Check) ([]Decision, error)
	// Reserve takes cost now, going into debt, if the wait before it is
	// covered is at most maxWait. Only token_bucket and gcra support it.
	Reserve(ctx context.Context, p *Policy, key string, cost int64, maxWait time.Duration) (Reservation, error)
	// CancelReservation gives a reservation's capacity back if its time has
	// not come yet (as far as the bucket's capacity allows).
	CancelReservation(ctx context.Context, r Reservation) error
	// Peek returns the key's state without consuming: Allowed and
	// RetryAfter say whether a request of cost 1 would pass now.
	Peek(ctx context.Context, p *Policy, key string) (Decision, error)
	// Reset deletes the key's state under the policy.
	Reset(ctx context.Context, p *Policy, key string) error
	// Acquire takes cost slots of a concurrency policy, returning the lease
	// to release. When refused the Lease is the zero value.
	Acquire(ctx context.Context, p *Policy, key string, cost int64) (Lease, Decision, error)
	// Release frees a lease's slots. Releasing an expired or unknown lease
	// is not an error.
	Release(ctx context.Context, l Lease) error
}

// Combine folds the decisions of a multi-key check into one: allowed only
// if all are, with the Limit and Remaining of the most constrained check
// (the least Remaining) and the longest RetryAfter and ResetAfter. It
// returns the zero Decision for no decisions.
func Combine(ds []Decision) Decision {
	if len(ds) == 0 {
		return Decision{}
	}
	out := ds[0]
	for _, d := range ds[1:] {
		out.Allowed = out.Allowed && d.Allowed
		if d.Remaining < out.Remaining {
			out.Limit, out.Remaining = d.Limit, d.Remaining
		}
		out.RetryAfter = max(out.RetryAfter, d.RetryAfter)
		out.ResetAfter = max(out.ResetAfter, d.ResetAfter)
	}
	return out
}

// AllowAll runs checks atomically on store: all consume only if all allow.
// allowed is true when every check allowed.
func AllowAll(ctx context.Context, store Store, checks []Check) (allowed bool, ds []Decision, err error) {
	ds, err = store.AllowMulti(ctx, checks)
	if err != nil {
		return false, nil, err
	}
	allowed = true
	for _, d := range ds {
		allowed = allowed && d.Allowed
	}
	return allowed, ds, nil
}
