package guard

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/ratelimit"
)

// PacingOptions configure a Pacer.
type PacingOptions struct {
	// Store keeps the buckets: the node's shared rate limit store (Redis
	// when configured, so every node draws from the same buckets), or a
	// MemoryStore. Required.
	Store ratelimit.Store
	// Provider names the buckets ("notify_pace:<provider>").
	Provider string
	// Rate is the provider's allowance in calls per second. Required.
	Rate float64
	// CriticalShare is the part of Rate kept for critical messages, in
	// [0, 1). If zero, 0.2; negative means none.
	CriticalShare float64
	// MaxWait is the longest a worker waits for its turn; a longer wait
	// sends the message back to the queue (a notify.Unavailable error, no
	// attempt spent) rather than holding the worker. If zero, 2 seconds.
	MaxWait time.Duration
}

// Pacer keeps calls to one provider within its rate with two token
// buckets: a critical one holding CriticalShare of the rate, and a general
// one holding the rest. Critical messages take from their own bucket first
// and from the general one when it is empty, so a campaign can never use
// the critical share, and critical traffic may use all of the rate. Calls
// over the rate wait (reserve, then sleep) up to MaxWait; beyond, they wait
// in the queue: extras are delayed, never dropped. It is safe for
// concurrent use.
type Pacer struct {
	opts     PacingOptions
	general  *ratelimit.PolicyLimiter
	critical *ratelimit.PolicyLimiter // nil when there is no critical share
}

// NewPacer checks opts and returns a Pacer.
func NewPacer(opts PacingOptions) (*Pacer, error) {
	if opts.Store == nil || opts.Rate <= 0 {
		return nil, fmt.Errorf("pacing %s: a store and a positive rate are required", opts.Provider)
	}
	if opts.CriticalShare == 0 {
		opts.CriticalShare = 0.2
	}
	opts.MaxWait = cmp.Or(opts.MaxWait, 2*time.Second)
	share := max(min(opts.CriticalShare, 0.9), 0)
	p := &Pacer{opts: opts}
	var err error
	crit := opts.Rate * share
	if p.general, err = bucket(opts.Store, opts.Provider, "", opts.Rate-crit); err != nil {
		return nil, err
	}
	if crit > 0 {
		if p.critical, err = bucket(opts.Store, opts.Provider, ":critical", crit); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// bucket is a token bucket of rate per second holding one second's worth
// (at least one token). Rates under one per second use a longer period.
func bucket(store ratelimit.Store, provider, suffix string, rate float64) (*ratelimit.PolicyLimiter, error) {
	period := time.Second
	for rate < 1 && period < time.Hour {
		rate, period = rate*10, period*10
	}
	limit := max(int64(math.Round(rate)), 1)
	return ratelimit.NewPolicyLimiter(store, ratelimit.Policy{Name: "notify_pace:" + provider + suffix,
		Algorithm: ratelimit.TokenBucket, Limit: limit, Period: period, Burst: limit})
}

// Wait takes one call's turn for category c, sleeping when the provider's
// rate asks for it, and returns how long it slept. When the turn is more
// than MaxWait away it takes nothing and returns a notify.Unavailable error
// carrying the wait, so the delivery goes back to the queue.
func (p *Pacer) Wait(ctx context.Context, c notify.Category) (time.Duration, error) {
	if c == notify.Critical && p.critical != nil {
		r, err := p.critical.Reserve(ctx, "", 1, 0)
		if err == nil && r.OK && r.Delay <= 0 {
			return 0, nil
		}
	}
	maxWait := p.opts.MaxWait
	if dl, ok := ctx.Deadline(); ok {
		maxWait = min(maxWait, time.Until(dl)/2)
	}
	r, err := p.general.Reserve(ctx, "", 1, maxWait)
	if err != nil {
		// The store is down: pacing fails open, the provider's own limits
		// and the breaker still protect it.
		return 0, nil
	}
	if !r.OK {
		return 0, notify.Unavailable(fmt.Errorf("%s: paced, next turn in %v", p.opts.Provider, r.Decision.RetryAfter.Round(time.Millisecond)),
			r.Decision.RetryAfter)
	}
	if r.Delay <= 0 {
		return 0, nil
	}
	t := time.NewTimer(r.Delay)
	defer t.Stop()
	select {
	case <-t.C:
		return r.Delay, nil
	case <-ctx.Done():
		_ = p.general.CancelReservation(context.WithoutCancel(ctx), r)
		return 0, ctx.Err()
	}
}
