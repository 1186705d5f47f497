package apperr

import (
	"context"
	"errors"
	"time"
)

// ErrTransient marks, anywhere in an error's chain, a failure that a moment's
// wait may cure: an engine's connection refused or dropped, a database
// shutting down or starting up. The record store marks such errors (they are
// Unavailable as well); what is transient is decided there, once. Callers
// whose work is safe to repeat retry them with [RetryTransient]; everything
// else (a bug, a constraint, a bad request, a statement timeout, a cancelled
// caller) is answered at once.
var ErrTransient = errors.New("transient failure")

// IsTransient reports whether err's chain holds [ErrTransient].
func IsTransient(err error) bool { return errors.Is(err, ErrTransient) }

// MarkTransient returns err with [ErrTransient] in its chain, keeping err's
// text; nil stays nil.
func MarkTransient(err error) error {
	if err == nil {
		return nil
	}
	return transientError{err}
}

type transientError struct{ error }

func (e transientError) Unwrap() error        { return e.error }
func (e transientError) Is(target error) bool { return target == ErrTransient }

// RetryWindow is how long a creation (a notification, a link) retries the
// store's transient failures inside the node before answering 503 with
// Retry-After: long enough to ride out a PostgreSQL restart or failover of a
// few seconds, short enough that a client's own timeout (typically 10 s and
// more) is not reached first.
const RetryWindow = 4 * time.Second

// The pauses between the attempts of [RetryTransient]: 50 ms, doubling up
// to 500 ms (so a 4 s window makes about 10 attempts).
const (
	retryFirstPause = 50 * time.Millisecond
	retryMaxPause   = 500 * time.Millisecond
)

// RetryTransient calls fn, and calls it again after a pause for as long as
// it fails with a transient error (see [ErrTransient]), until it returns nil
// or another error. It stops retrying when the next pause would end past
// deadline, past ctx's retry deadline (see [WithRetryDeadline]) or past
// ctx's deadline, or when ctx is done, and returns fn's last error, so a
// caller that gives up answers with the store's own (Unavailable) error.
// Several calls that share one deadline share one window. Pauses are on
// the wall clock (time.Now, timers).
func RetryTransient(ctx context.Context, deadline time.Time, fn func() error) error {
	if d, ok := ctx.Value(retryDeadlineKey{}).(time.Time); ok && d.Before(deadline) {
		deadline = d
	}
	pause := retryFirstPause
	for {
		err := fn()
		if err == nil || !IsTransient(err) {
			return err
		}
		wake := time.Now().Add(pause)
		if wake.After(deadline) {
			return err
		}
		if d, ok := ctx.Deadline(); ok && wake.After(d) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, retryMaxPause)
	}
}

type retryDeadlineKey struct{}

// WithRetryDeadline returns ctx carrying t, or the retry deadline ctx
// already carries if that is earlier: [RetryTransient] does not retry past
// it. It is for work done on behalf of requests that waited in a queue
// before it started (a batch of link creations written together): the
// batch retries only within the window of its oldest request, so a
// request never waits for the retries of the batch ahead of it and then
// for a whole window of its own. Unlike a context deadline it cuts no
// attempt short.
func WithRetryDeadline(ctx context.Context, t time.Time) context.Context {
	if d, ok := ctx.Value(retryDeadlineKey{}).(time.Time); ok && !t.Before(d) {
		return ctx
	}
	return context.WithValue(ctx, retryDeadlineKey{}, t)
}
