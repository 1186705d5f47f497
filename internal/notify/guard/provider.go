package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// Metrics receives what guarded providers observe. Every field may be
// nil. The functions are called concurrently.
type Metrics struct {
	// Call is told every call made: its class (ok, temporary, permanent)
	// and how long it took.
	Call func(provider, class string, took time.Duration)
	// Refused is told every call not made, and why ("breaker", "pacing").
	Refused func(provider, reason string)
	// PacingWait is told how long a call waited for its turn.
	PacingWait func(provider string, waited time.Duration)
	// Breaker is told every state change of a provider's breaker.
	Breaker func(provider string, s BreakerState)
}

// Provider guards one notify.Provider with pacing, a circuit breaker and
// metrics; it is itself a notify.Provider, so the worker sees no
// difference. Provider (the wrapped one) is required; the zero value of
// each optional part turns it off. It is safe for concurrent use.
type Provider struct {
	Provider notify.Provider
	// Breaker, if not nil, stops calls after repeated temporary failures.
	Breaker *Breaker
	// Pacer, if not nil, keeps calls within the provider's rate.
	Pacer   *Pacer
	Metrics Metrics
}

var _ notify.Provider = (*Provider)(nil)

// Name returns the wrapped provider's name.
func (g *Provider) Name() string { return g.Provider.Name() }

// NeedsContact returns the wrapped provider's answer.
func (g *Provider) NeedsContact() bool { return g.Provider.NeedsContact() }

// BreakerState returns the breaker's state (closed when there is none).
func (g *Provider) BreakerState() BreakerState {
	if g.Breaker == nil {
		return BreakerClosed
	}
	return g.Breaker.State()
}

// Send asks the breaker, waits for the pacer, then calls the provider. A
// call the breaker or the pacer refuses fails with a notify.Unavailable
// error. Temporary failures, provider faults among them, count against
// the breaker.
func (g *Provider) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	name := g.Provider.Name()
	if g.Breaker != nil {
		if ok, wait := g.Breaker.Allow(); !ok {
			g.refused(name, "breaker")
			return notify.Receipt{}, notify.Unavailable(fmt.Errorf("%s: circuit breaker open", name), wait)
		}
	}
	if g.Pacer != nil {
		waited, err := g.Pacer.Wait(ctx, m.Category)
		if err != nil {
			if g.Breaker != nil {
				g.Breaker.Cancel()
			}
			g.refused(name, "pacing")
			return notify.Receipt{}, err
		}
		if waited > 0 && g.Metrics.PacingWait != nil {
			g.Metrics.PacingWait(name, waited)
		}
	}
	start := time.Now()
	rc, err := g.Provider.Send(ctx, m)
	class := notify.ErrorClass(err)
	if g.Metrics.Call != nil {
		g.Metrics.Call(name, class, time.Since(start))
	}
	switch {
	case g.Breaker == nil:
	case errors.Is(ctx.Err(), context.Canceled):
		// The worker is stopping: says nothing of the provider. A timeout
		// (a slow provider) does count against it.
		g.Breaker.Cancel()
	default:
		g.Breaker.Done(class == notify.ClassTemporary)
	}
	return rc, err
}

func (g *Provider) refused(name, reason string) {
	if g.Metrics.Refused != nil {
		g.Metrics.Refused(name, reason)
	}
}
