// Package breaker keeps the callers of a dependency that went down (the
// record store during a PostgreSQL outage) from calling it one by one:
// while it is down, one call at a time reaches it, and the others are
// answered at once.
package breaker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Default pauses between the probes of a dependency known down.
const (
	DefaultBackoff    = 500 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// ErrOpen is what a call refused without reaching the dependency gets,
// wrapped in an *OpenError.
var ErrOpen = errors.New(openMessage)

const openMessage = "the store is unavailable; retry shortly"

// OpenError is ErrOpen with when the dependency will be tried again. It is
// an apperr Unavailable error (503) and transient.
type OpenError struct{ RetryAfter time.Duration }

func (e *OpenError) Error() string { return ErrOpen.Error() }

// Is makes an OpenError ErrOpen, transient (apperr.ErrTransient) and
// Unavailable.
func (e *OpenError) Is(target error) bool {
	return target == ErrOpen || target == apperr.ErrTransient
}

// Unwrap gives the apperr error the edge maps to 503.
func (e *OpenError) Unwrap() error { return errUnavailable }

var errUnavailable = apperr.New(apperr.Unavailable, openMessage)

// Breaker guards calls to a dependency. While it answers, every call
// reaches it. Once a call fails with a transient error (apperr.ErrTransient)
// it is down: calls are refused with an *OpenError without reaching it,
// except one call at a time, the probe, once the pause since the last
// probe has passed (Backoff, doubling up to MaxBackoff); the first answer
// that is not a transient failure (a record, or "not found") brings it
// back up. Ride lets a caller wait out a short outage instead, with one
// caller at a time retrying.
//
// The zero value is ready to use, with the default pauses. A Breaker is
// safe for concurrent use.
type Breaker struct {
	// Backoff is the pause after the first failed probe; 0 means
	// DefaultBackoff. MaxBackoff bounds its doubling; 0 means
	// DefaultMaxBackoff.
	Backoff, MaxBackoff time.Duration

	mu     sync.Mutex
	down   bool          // a call failed transiently, none answered since
	known  bool          // a whole ride failed: Ride refuses at once too
	riding chan struct{} // while a caller rides: closed when it ends
	next   time.Time     // while down: when the next probe may go
	pause  time.Duration // the pause after the next failed probe
}

// Call calls fn, unless the dependency is down and it is not time for a
// probe (or a ride is under way): then it returns an *OpenError without
// calling fn. fn's answer tells whether the dependency is up.
func (b *Breaker) Call(fn func() error) error {
	b.mu.Lock()
	if b.down {
		now := time.Now()
		if b.riding != nil || now.Before(b.next) {
			err := b.openLocked(now)
			b.mu.Unlock()
			return err
		}
		b.backOffLocked(now) // the other callers wait for this probe's pause
	}
	b.mu.Unlock()
	err := fn()
	b.report(err)
	return err
}

// Ride is for a caller that would rather wait, until deadline, for the
// dependency to come back than fail (a redirect of a link no cache
// holds, during a PostgreSQL restart). One caller at a time retries fn
// (apperr.RetryTransient until its deadline); the others wait for it
// without calling fn, and call fn once if it came back. Once a whole
// ride failed, Ride answers like Call until the dependency is up again:
// a node retries one outage once, not once per caller.
func (b *Breaker) Ride(ctx context.Context, deadline time.Time, fn func() error) error {
	for {
		b.mu.Lock()
		switch {
		case !b.down || b.known:
			b.mu.Unlock()
			return b.Call(fn)
		case b.riding == nil:
			ch := make(chan struct{})
			b.riding = ch
			b.mu.Unlock()
			err := apperr.RetryTransient(ctx, deadline, fn)
			b.mu.Lock()
			b.riding = nil
			close(ch)
			b.mu.Unlock()
			b.report(err)
			if apperr.IsTransient(err) && ctx.Err() == nil {
				b.mu.Lock()
				if b.known = b.down; b.known {
					b.backOffLocked(time.Now()) // the next probe after a pause
				}
				b.mu.Unlock()
			}
			return err
		}
		ch := b.riding
		b.mu.Unlock()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ch:
			t.Stop()
		case <-t.C:
			return b.open(time.Now())
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// Down reports whether the dependency is known down.
func (b *Breaker) Down() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.down
}

// report records fn's answer: a transient failure puts the dependency
// down, anything else brings it up.
func (b *Breaker) report(err error) {
	if errors.Is(err, ErrOpen) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !apperr.IsTransient(err) {
		b.down, b.known, b.pause = false, false, 0
		return
	}
	if !b.down {
		b.down, b.pause = true, 0
		b.backOffLocked(time.Now())
	}
}

func (b *Breaker) backOffLocked(now time.Time) {
	first, limit := b.Backoff, b.MaxBackoff
	if first <= 0 {
		first = DefaultBackoff
	}
	if limit <= 0 {
		limit = DefaultMaxBackoff
	}
	if b.pause == 0 {
		b.pause = first
	}
	b.next = now.Add(b.pause)
	b.pause = min(2*b.pause, limit)
}

func (b *Breaker) open(now time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openLocked(now)
}

func (b *Breaker) openLocked(now time.Time) error {
	return &OpenError{RetryAfter: max(b.next.Sub(now), time.Second)}
}
