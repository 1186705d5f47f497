package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/internal/queue"
)

// recoverJobs returns handle with a job's panic recovered and reported on
// the "worker" surface. The job is then acknowledged, that is skipped:
// handed back, it would panic again at once, in a loop, and hold the
// user's later jobs behind it. Its delivery keeps the state it had, so
// the recovery sweep offers it again once its threshold has passed.
func recoverJobs(rep *panics.Reporter, handle queue.Handler) queue.Handler {
	return func(ctx context.Context, j notify.Job) error {
		err := rep.Do(ctx, panics.Worker, func() error { return handle(ctx, j) }, slog.String("job", j.MsgID()))
		if errors.Is(err, panics.ErrRecovered) {
			return nil
		}
		return err
	}
}
