package main

import (
	"context"

	"github.com/sluicehq/sluice/internal/audience"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/notify"
)

// startAudiences builds topics and broadcasts on the node's record store
// and notification service (each member's notification goes through the
// whole pipeline), and runs the broadcast sender until the node stops.
// Every node runs one: broadcasts and their progress live in the store,
// and each node claims the due ones with a lease.
func (n *node) startAudiences(ctx context.Context, notifier *notify.Service) *audience.Service {
	c := n.cfg.Notify.Audiences
	svc := audience.New(audience.Options{
		Store:             n.db,
		Notifier:          notifier,
		MaxTopics:         int64(c.MaxTopics),
		MaxSubscriptions:  int64(c.MaxSubscriptions),
		MaxLiveBroadcasts: c.MaxLiveBroadcasts,
		Batch:             c.Batch,
		Lease:             c.Lease,
		Retention:         n.cfg.Notify.Retention,              // final broadcasts are kept as long as notifications
		Metrics:           metrics.NewAudiences(n.reg).Hooks(), // sluice_broadcast*
		Logger:            n.log,
	})
	n.goBackground(ctx, "broadcast sender", func(ctx context.Context) error { return svc.Run(ctx, c.Tick) })
	return svc
}
