package guard_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/notify/guard"
)

func TestBreakerStates(t *testing.T) {
	t.Parallel()
	type step struct {
		advance time.Duration
		op      string // "call-fail", "call-ok", "allow?"
		want    guard.BreakerState
		allowed bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "opens after failures in a row, successes reset the count", steps: []step{
			{op: "call-fail", want: guard.BreakerClosed},
			{op: "call-ok", want: guard.BreakerClosed},
			{op: "call-fail", want: guard.BreakerClosed},
			{op: "call-fail", want: guard.BreakerClosed},
			{op: "call-fail", want: guard.BreakerOpen},
			{op: "allow?", want: guard.BreakerOpen, allowed: false},
		}},
		{name: "half-open after OpenFor, one probe at a time, closes on success", steps: []step{
			{op: "call-fail"}, {op: "call-fail"}, {op: "call-fail", want: guard.BreakerOpen},
			{advance: 10 * time.Second, op: "allow?", want: guard.BreakerHalfOpen, allowed: true},
			{op: "allow?", want: guard.BreakerHalfOpen, allowed: false}, // the probe is in flight
			{op: "done-ok", want: guard.BreakerClosed},
			{op: "allow?", want: guard.BreakerClosed, allowed: true},
		}},
		{name: "a failed probe opens it again", steps: []step{
			{op: "call-fail"}, {op: "call-fail"}, {op: "call-fail", want: guard.BreakerOpen},
			{advance: 10 * time.Second, op: "call-fail", want: guard.BreakerOpen},
			{advance: 9 * time.Second, op: "allow?", want: guard.BreakerOpen, allowed: false},
			{advance: time.Second, op: "allow?", want: guard.BreakerHalfOpen, allowed: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var changes []guard.BreakerState
				b := guard.NewBreaker(guard.BreakerOptions{Failures: 3, OpenFor: 10 * time.Second,
					OnChange: func(s guard.BreakerState) { changes = append(changes, s) }})
				for i, s := range tt.steps {
					time.Sleep(s.advance) // the bubble's clock: the breaker's cool-down passes at once
					switch s.op {
					case "call-fail", "call-ok":
						if ok, _ := b.Allow(); ok {
							b.Done(s.op == "call-fail")
						}
					case "done-ok":
						b.Done(false)
					case "allow?":
						if ok, _ := b.Allow(); ok != s.allowed {
							t.Fatalf("step %d: Allow = %v, want %v", i, ok, s.allowed)
						}
					}
					if got := b.State(); got != s.want {
						t.Fatalf("step %d (%s): state %s, want %s", i, s.op, got, s.want)
					}
				}
				if len(changes) == 0 {
					t.Error("OnChange never called")
				}
			})
		})
	}
}
