package main

import (
	"cmp"
	"context"
	"encoding/json"

	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/workflow"
)

// startWorkflows builds the workflow engine on the node's record store and
// notification service (a send step is a notification through the whole
// pipeline), and runs its scheduler until the node stops. Every node runs
// one: runs live in the store, and each node claims the due ones. Started
// after the notification service, it stops before the notification
// workers, and after the HTTP server has drained.
func (n *node) startWorkflows(ctx context.Context, notifier *notify.Service) *workflow.Service {
	wc := n.cfg.Notify.Workflows
	m := metrics.NewWorkflows(n.reg) // sluice_workflow_*
	svc := workflow.New(workflow.Options{
		Store:              n.db,
		Sender:             notifier,
		Templates:          notifier,
		Profiles:           profiles{Service: notifier, db: n.db},
		Metrics:            m.Hooks(),
		Logger:             n.log,
		Tick:               wc.Tick,
		Lease:              wc.Lease,
		Batch:              wc.Batch,
		MaxLiveRunsPerUser: wc.MaxLiveRunsPerUser,
		MaxWorkflows:       wc.MaxWorkflows,
		MaxLiveRuns:        wc.MaxLiveRuns,
		Attributes:         n.db,
		MaxAttributeUsers:  wc.MaxAttributeUsers,
		Retention:          cmp.Or(wc.Retention, n.cfg.Notify.Retention),
		Panics:             n.panics, // a run whose step panics fails; the scheduler goes on
	})
	n.goBackground(ctx, "workflow scheduler", svc.RunScheduler)
	// The gauge reads the count the scheduler keeps for max_live_runs.
	n.goBackground(ctx, "workflow runs gauge", func(ctx context.Context) error {
		m.WatchRuns(ctx, svc.RunCounts, 0)
		return nil
	})
	return svc
}

// profiles is what a run reads of its user: the time zone of a wait until
// a local time from the user's notification settings, the attributes a
// branch reads from the store.
type profiles struct {
	*notify.Service
	db *store.DB
}

func (p profiles) UserAttributes(ctx context.Context, user string) (json.RawMessage, error) {
	return p.db.UserAttributes(ctx, user)
}

var _ workflow.Profiles = profiles{}
