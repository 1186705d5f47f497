package breaker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

var errDown = apperr.MarkTransient(errors.New("connection refused"))

// TestOneCallerReachesADependencyThatIsDown: 50 callers riding out an
// outage make one retry loop (the others wait without calling); once the
// ride failed, calls are refused at once with an OpenError (503, with
// Retry-After) except one probe per pause; the first probe that gets an
// answer brings every call through again.
func TestOneCallerReachesADependencyThatIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b Breaker
		var up atomic.Bool
		var calls atomic.Int64
		fn := func() error {
			calls.Add(1)
			if up.Load() {
				return nil
			}
			return errDown
		}
		if err := b.Call(fn); !errors.Is(err, errDown) || !b.Down() {
			t.Fatalf("first failing call = %v, down %v", err, b.Down())
		}
		var wg sync.WaitGroup
		var open atomic.Int64
		for range 50 {
			wg.Go(func() {
				err := b.Ride(context.Background(), time.Now().Add(3*time.Second), fn)
				if errors.Is(err, ErrOpen) {
					open.Add(1)
				}
			})
		}
		wg.Wait()
		if n := calls.Load(); n > 15 {
			t.Errorf("50 riders called the dependency %d times, want one retry loop (about 10)", n)
		}
		if open.Load() < 49 {
			t.Errorf("%d of 50 riders got an OpenError, want all but the one that retried", open.Load())
		}
		before := calls.Load()
		err := b.Ride(context.Background(), time.Now().Add(3*time.Second), fn)
		var oe *OpenError
		if !errors.As(err, &oe) || oe.RetryAfter < time.Second || !apperr.Is(err, apperr.Unavailable) || calls.Load() != before {
			t.Fatalf("Ride once the outage is known = %v (called %d times), want an Unavailable OpenError at once", err, calls.Load()-before)
		}
		time.Sleep(DefaultMaxBackoff + time.Millisecond) // synctest: fake time
		_ = b.Call(fn)                                   // the probe
		_ = b.Call(fn)                                   // refused: the probe's pause
		if n := calls.Load() - before; n != 1 {
			t.Errorf("two calls after the pause reached the dependency %d times, want 1 (the probe)", n)
		}
		up.Store(true)
		time.Sleep(DefaultMaxBackoff + time.Millisecond)
		if err := b.Call(fn); err != nil || b.Down() {
			t.Fatalf("probe with the dependency back = %v, down %v", err, b.Down())
		}
		if err := b.Call(fn); err != nil {
			t.Errorf("call after the dependency came back = %v", err)
		}
	})
}
