package guard

import (
	"cmp"
	"sync"
	"time"
)

// BreakerState is a circuit breaker's state.
type BreakerState int

// Breaker states: closed lets calls through, open refuses them, half-open
// lets probes through one at a time.
const (
	BreakerClosed BreakerState = iota
	BreakerOpen
	BreakerHalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half_open"
	}
	return "closed"
}

// BreakerOptions configure a Breaker.
type BreakerOptions struct {
	// Failures is how many failed calls in a row open the breaker. If
	// zero, 5.
	Failures int
	// OpenFor is how long an open breaker refuses calls before it lets a
	// probe through. If zero, 30 seconds.
	OpenFor time.Duration
	// Probes is how many probes in a row must succeed to close it again.
	// If zero, 1.
	Probes int
	// OnChange, if not nil, is told every state change (metrics, logs). It
	// is called with the breaker's lock held: it must not call back.
	OnChange func(BreakerState)
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
}

// Breaker is a circuit breaker for one provider: after Failures failed
// calls in a row it opens and refuses calls for OpenFor, then lets one
// probe at a time through (half-open) until Probes succeed in a row
// (closed) or one fails (open again). Only temporary failures count: a
// permanent refusal (an invalid address) is an answer from a healthy
// provider. It is safe for concurrent use; build it with NewBreaker.
type Breaker struct {
	opts     BreakerOptions
	mu       sync.Mutex
	state    BreakerState
	failures int
	probes   int // successful probes in a row, half-open
	inFlight bool
	openedAt time.Time
}

// NewBreaker returns a closed Breaker.
func NewBreaker(opts BreakerOptions) *Breaker {
	opts.Failures = cmp.Or(opts.Failures, 5)
	opts.OpenFor = cmp.Or(opts.OpenFor, 30*time.Second)
	opts.Probes = cmp.Or(opts.Probes, 1)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Breaker{opts: opts}
}

// State returns the current state.
func (b *Breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(b.opts.Now())
	return b.state
}

// Allow reports whether a call may go ahead; when not, wait is how long
// until it might. A call allowed must be ended with Done or Cancel.
func (b *Breaker) Allow() (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.opts.Now()
	b.advance(now)
	switch b.state {
	case BreakerOpen:
		return false, b.openedAt.Add(b.opts.OpenFor).Sub(now)
	case BreakerHalfOpen:
		if b.inFlight {
			return false, max(b.opts.OpenFor/10, 100*time.Millisecond)
		}
		b.inFlight = true
	}
	return true, 0
}

// Done records an allowed call's outcome: failed is true for a temporary
// failure (an error, a timeout), false for an answer.
func (b *Breaker) Done(failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.opts.Now()
	probe := b.state == BreakerHalfOpen && b.inFlight
	if probe {
		b.inFlight = false
	}
	switch {
	case !failed && probe:
		b.probes++
		if b.probes >= b.opts.Probes {
			b.set(BreakerClosed)
		}
	case !failed:
		if b.state == BreakerClosed {
			b.failures = 0
		}
	case probe:
		b.open(now)
	case b.state == BreakerClosed:
		b.failures++
		if b.failures >= b.opts.Failures {
			b.open(now)
		}
	}
}

// Cancel ends an allowed call that was not made (pacing refused it).
func (b *Breaker) Cancel() {
	b.mu.Lock()
	if b.state == BreakerHalfOpen {
		b.inFlight = false
	}
	b.mu.Unlock()
}

func (b *Breaker) advance(now time.Time) {
	if b.state == BreakerOpen && !now.Before(b.openedAt.Add(b.opts.OpenFor)) {
		b.set(BreakerHalfOpen)
	}
}

func (b *Breaker) open(now time.Time) {
	b.openedAt = now
	b.set(BreakerOpen)
}

func (b *Breaker) set(s BreakerState) {
	if s == b.state {
		return
	}
	b.state, b.failures, b.probes, b.inFlight = s, 0, 0, false
	if b.opts.OnChange != nil {
		b.opts.OnChange(s)
	}
}
