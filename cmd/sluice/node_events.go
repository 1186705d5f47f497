package main

import (
	"context"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/events"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/guard"
	"github.com/sluicehq/sluice/ratelimit"
)

// statusEvents is the node's status events service and the notification
// service it queues events on, bound once that exists: the shortener's
// click flusher (started first) may emit before then.
type statusEvents struct {
	svc    *events.Service
	notify atomic.Pointer[notify.Service]
}

// SendSystem implements events.Notifier.
func (e *statusEvents) SendSystem(ctx context.Context, r notify.SystemRequest) (notify.Accepted, error) {
	svc := e.notify.Load()
	if svc == nil {
		return notify.Accepted{}, apperr.New(apperr.Unavailable, "notifications are starting")
	}
	return svc.SendSystem(ctx, r)
}

// newStatusEvents builds the status events service on the node's store.
func (n *node) newStatusEvents() *statusEvents {
	ec := n.cfg.Notify.Events
	se := &statusEvents{}
	m := metrics.NewEvents(n.reg)
	se.svc = events.NewService(events.Options{
		Store: n.db, Notifier: se, Retention: ec.Retention,
		DisableAfter: ec.DisableAfter, DisableAfterFailures: ec.DisableAfterFailures,
		MaxSubscriptions: ec.MaxSubscriptions, AllowPrivate: n.cfg.AllowPrivate, Logger: n.log,
		Counted: m.Counted, Disabled: m.Disabled,
	})
	return se
}

// systemProvider is the provider of system notifications: the events
// sender posting through the webhook provider p, behind a guard per
// subscription pacing it at events.rate (every node together, on the
// node's counter store).
func (n *node) systemProvider(se *statusEvents, p events.Poster, pace ratelimit.Store) (notify.Provider, error) {
	ec, pc := n.cfg.Notify.Events, n.cfg.Notify.Providers
	if ec.Rate > 0 { // fail at start, not at the first event
		if _, err := guard.NewPacer(guard.PacingOptions{Store: pace, Provider: "events:check", Rate: ec.Rate}); err != nil {
			return nil, err
		}
	}
	return &guard.Set{Provider: events.NewSender(se.svc, p),
		Key: func(m notify.Message) string { return m.UserID },
		New: func(sub string) (*guard.Breaker, *guard.Pacer) {
			if ec.Rate <= 0 {
				return nil, nil
			}
			p, _ := guard.NewPacer(guard.PacingOptions{Store: pace, Provider: "events:" + events.SubscriptionOf(sub), Rate: ec.Rate,
				CriticalShare: -1, MaxWait: pc.MaxPacingWait})
			return nil, p
		}}, nil
}
