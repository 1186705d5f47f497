package guard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/guard"
)

func TestGuardRefusesWhenOpenAndCountsOnlyTemporaryFailures(t *testing.T) {
	t.Parallel()
	p := &answers{notify.Permanentf("bad address"), notify.Permanentf("bad address"), errors.New("reset"), notify.Temporary(errors.New("503"), 0)}
	now := time.Unix(0, 0)
	b := guard.NewBreaker(guard.BreakerOptions{Failures: 2, OpenFor: time.Minute, Now: func() time.Time { return now }})
	var calls, refused int
	g := &guard.Provider{Provider: p, Breaker: b, Metrics: guard.Metrics{
		Call:    func(string, string, time.Duration) { calls++ },
		Refused: func(string, string) { refused++ },
	}}
	for range 4 {
		_, _ = g.Send(t.Context(), notify.Message{})
	}
	if b.State() != guard.BreakerOpen {
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

// answers is a provider that answers each call with the next of its
// errors; nil, or none left, is a message sent. It is for one goroutine.
type answers []error

func (a *answers) Name() string       { return "p" }
func (a *answers) NeedsContact() bool { return false }
func (a *answers) Send(context.Context, notify.Message) (notify.Receipt, error) {
	if len(*a) == 0 {
		return notify.Receipt{}, nil
	}
	err := (*a)[0]
	*a = (*a)[1:]
	return notify.Receipt{}, err
}
