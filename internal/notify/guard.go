package notify

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ProviderMetrics receives what guarded providers observe. Every field may
// be nil. The functions are called concurrently.
type ProviderMetrics struct {
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

// Guard wraps a Provider with pacing, a circuit breaker and metrics; it is
// itself a Provider, so the worker sees no difference. The zero value of
// each optional part turns it off. A Guard is safe for concurrent use.
type Guard struct {
	Provider Provider
	// Breaker, if not nil, stops calls after repeated temporary failures.
	Breaker *Breaker
	// Pacer, if not nil, keeps calls within the provider's rate.
	Pacer   *Pacer
	Metrics ProviderMetrics
}

var _ Provider = (*Guard)(nil)

// Name returns the wrapped provider's name.
func (g *Guard) Name() string { return g.Provider.Name() }

// NeedsContact returns the wrapped provider's answer.
func (g *Guard) NeedsContact() bool { return g.Provider.NeedsContact() }

// BreakerState returns the breaker's state (closed when there is none).
func (g *Guard) BreakerState() BreakerState {
	if g.Breaker == nil {
		return BreakerClosed
	}
	return g.Breaker.State()
}

// Send asks the breaker, waits for the pacer, then calls the provider. A
// call the breaker or the pacer refuses fails with an Unavailable error.
// Temporary failures, provider faults among them, count against the
// breaker.
func (g *Guard) Send(ctx context.Context, m Message) (Receipt, error) {
	name := g.Provider.Name()
	if g.Breaker != nil {
		if ok, wait := g.Breaker.Allow(); !ok {
			g.refused(name, "breaker")
			return Receipt{}, Unavailable(fmt.Errorf("%s: circuit breaker open", name), wait)
		}
	}
	if g.Pacer != nil {
		waited, err := g.Pacer.Wait(ctx, m.Category)
		if err != nil {
			if g.Breaker != nil {
				g.Breaker.Cancel()
			}
			g.refused(name, "pacing")
			return Receipt{}, err
		}
		if waited > 0 && g.Metrics.PacingWait != nil {
			g.Metrics.PacingWait(name, waited)
		}
	}
	start := time.Now()
	rc, err := g.Provider.Send(ctx, m)
	class := ErrorClass(err)
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
		g.Breaker.Done(class == ClassTemporary)
	}
	return rc, err
}

func (g *Guard) refused(name, reason string) {
	if g.Metrics.Refused != nil {
		g.Metrics.Refused(name, reason)
	}
}
