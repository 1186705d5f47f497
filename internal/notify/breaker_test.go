package notify_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/ratelimit"
)

func TestBreakerStates(t *testing.T) {
	t.Parallel()
	type step struct {
		advance time.Duration
		op      string // "call-fail", "call-ok", "allow?"
		want    notify.BreakerState
		allowed bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "opens after failures in a row, successes reset the count", steps: []step{
			{op: "call-fail", want: notify.BreakerClosed},
			{op: "call-ok", want: notify.BreakerClosed},
			{op: "call-fail", want: notify.BreakerClosed},
			{op: "call-fail", want: notify.BreakerClosed},
			{op: "call-fail", want: notify.BreakerOpen},
			{op: "allow?", want: notify.BreakerOpen, allowed: false},
		}},
		{name: "half-open after OpenFor, one probe at a time, closes on success", steps: []step{
			{op: "call-fail"}, {op: "call-fail"}, {op: "call-fail", want: notify.BreakerOpen},
			{advance: 10 * time.Second, op: "allow?", want: notify.BreakerHalfOpen, allowed: true},
			{op: "allow?", want: notify.BreakerHalfOpen, allowed: false}, // the probe is in flight
			{op: "done-ok", want: notify.BreakerClosed},
			{op: "allow?", want: notify.BreakerClosed, allowed: true},
		}},
		{name: "a failed probe opens it again", steps: []step{
			{op: "call-fail"}, {op: "call-fail"}, {op: "call-fail", want: notify.BreakerOpen},
			{advance: 10 * time.Second, op: "call-fail", want: notify.BreakerOpen},
			{advance: 9 * time.Second, op: "allow?", want: notify.BreakerOpen, allowed: false},
			{advance: time.Second, op: "allow?", want: notify.BreakerHalfOpen, allowed: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &clock{t: time.Unix(0, 0)}
			var changes []notify.BreakerState
			b := notify.NewBreaker(notify.BreakerOptions{Failures: 3, OpenFor: 10 * time.Second, Now: c.Now,
				OnChange: func(s notify.BreakerState) { changes = append(changes, s) }})
			for i, s := range tt.steps {
				c.Advance(s.advance)
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
	}
}

func TestPacerKeepsACriticalShare(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
		p, err := notify.NewPacer(notify.PacingOptions{Store: store, Provider: "sms", Rate: 10, CriticalShare: 0.2, MaxWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		// Marketing takes the general 8/s at once, then waits for its turns.
		start := time.Now()
		for range 8 {
			if w, err := p.Wait(ctx, notify.Marketing); err != nil || w != 0 {
				t.Fatalf("Wait(marketing) within the burst = %v, %v", w, err)
			}
		}
		if w, err := p.Wait(ctx, notify.Marketing); err != nil || w <= 0 {
			t.Fatalf("Wait(marketing) past the burst = %v, %v; want a wait", w, err)
		}
		// Critical still goes at once: its share is untouched.
		for range 2 {
			if w, err := p.Wait(ctx, notify.Critical); err != nil || w != 0 {
				t.Fatalf("Wait(critical) = %v, %v; want no wait", w, err)
			}
		}
		// Many at once: those whose turn is more than MaxWait away are not
		// made and wait in the queue (unavailable), nothing consumed.
		errs := make(chan error, 20)
		for range 20 {
			go func() { _, err := p.Wait(ctx, notify.Marketing); errs <- err }()
		}
		var unavailable int
		for range 20 {
			if err := <-errs; err != nil {
				if notify.ErrorClass(err) != notify.ClassUnavailable {
					t.Fatalf("Wait = %v, want unavailable", err)
				}
				unavailable++
			}
		}
		if unavailable < 10 || unavailable > 13 {
			t.Errorf("%d of 20 concurrent calls sent back to the queue, want about 12 (8/s, 1s MaxWait)", unavailable)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("pacing took %v of fake time, want about 2s", el)
		}
	})
}

func TestGuardRefusesWhenOpenAndCountsOnlyTemporaryFailures(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(0, 0)}
	p := &scripted{name: "p"}
	b := notify.NewBreaker(notify.BreakerOptions{Failures: 2, OpenFor: time.Minute, Now: c.Now})
	var calls, refused int
	g := &notify.Guard{Provider: p, Breaker: b, Metrics: notify.ProviderMetrics{
		Call:    func(string, string, time.Duration) { calls++ },
		Refused: func(string, string) { refused++ },
	}}
	p.script(notify.Permanentf("bad address"), notify.Permanentf("bad address"), errors.New("reset"), notify.Temporary(errors.New("503"), 0))
	for range 4 {
		_, _ = g.Send(t.Context(), notify.Message{})
	}
	if b.State() != notify.BreakerOpen {
		t.Fatalf("state = %s after 2 permanent and 2 temporary failures, want open", b.State())
	}
	_, err := g.Send(t.Context(), notify.Message{})
	var se *notify.SendError
	if !errors.As(err, &se) || !se.Unavailable || se.RetryAfter != time.Minute {
		t.Fatalf("Send while open = %v, want unavailable for a minute", err)
	}
	if calls != 4 || refused != 1 {
		t.Errorf("metrics: %d calls, %d refused; want 4 and 1", calls, refused)
	}
}
