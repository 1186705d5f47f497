package enginetest

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// PollInterval is how long Poll sleeps between two calls of its condition:
// short enough that a test waiting on another process or goroutine notices
// the change at once, long enough that a 2-core machine running other
// tests is not spun.
const PollInterval = 20 * time.Millisecond

// errNotYet is Poll's last state when the condition never said why.
var errNotYet = errors.New("condition not met")

// Poll calls check until it returns nil and returns how long that took, or
// returns check's last error once within has passed. It never calls
// t.Fatal, so a goroutine other than the test's may use it; the sleep
// between calls is a polling interval, not a wait for an outcome.
//
// Poll is for conditions that another process, goroutine or engine makes
// true. A test that waits on its own timers (a breaker's cool-down, a
// heartbeat) uses testing/synctest instead.
func Poll(within time.Duration, check func() error) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(within)
	for {
		err := check()
		if err == nil {
			return time.Since(start), nil
		}
		if !time.Now().Before(deadline) {
			return time.Since(start), err
		}
		time.Sleep(PollInterval)
	}
}

// Eventually polls cond until it holds and returns how long that took; it
// fails the test, naming what, when within passes first. Call it only on
// the test's goroutine; elsewhere use Poll.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return EventuallyNil(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// EventuallyNil polls check until it returns nil and returns how long that
// took; it fails the test with what and check's last error (the state it
// saw) when within passes first. Call it only on the test's goroutine.
func EventuallyNil(t testing.TB, within time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	took, err := Poll(within, check)
	if err != nil {
		t.Fatalf("%s: not within %v; last state: %v", what, within, err)
	}
	return took
}

// State is a convenience for conditions that describe what they saw: it
// returns nil when ok holds, else an error formatted from the state.
func State(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}
