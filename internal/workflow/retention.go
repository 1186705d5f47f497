package workflow

import (
	"context"
	"time"
)

// purgeBatch is the rows Purge deletes per statement.
const purgeBatch = 1000

// Purge deletes the history past Retention: the events taken in before
// it, and the runs that ended before it (completed, canceled, failed).
// Runs are kept longer while a current workflow's entry.once_per is
// longer than Retention, since once_per reads a user's past runs. Live
// runs are never deleted, however old. It deletes limit rows (default
// 1,000) a statement until none are left or ctx ends, and returns how
// many events and runs it deleted. Every node's RunScheduler runs it
// every PurgeEvery; two nodes purging at once delete each row once.
func (s *Service) Purge(ctx context.Context, limit int) (events, runs int, err error) {
	if limit <= 0 {
		limit = purgeBatch
	}
	now := s.opts.Now()
	events, err = drain(ctx, limit, func(n int) (int, error) {
		return s.opts.Store.DeleteWorkflowEventsBefore(ctx, now.Add(-s.opts.Retention), n)
	})
	if err != nil {
		return events, 0, err
	}
	keep, err := s.runsKept(ctx)
	if err != nil {
		return events, 0, err
	}
	runs, err = drain(ctx, limit, func(n int) (int, error) {
		return s.opts.Store.DeleteEndedRunsBefore(ctx, now.Add(-keep), n)
	})
	return events, runs, err
}

// runsKept is how long runs that ended are kept: Retention, or the
// longest once_per of a current workflow.
func (s *Service) runsKept(ctx context.Context) (time.Duration, error) {
	all, err := s.Workflows(ctx)
	if err != nil {
		return 0, err
	}
	keep := s.opts.Retention
	for _, w := range all {
		keep = max(keep, w.Entry.OncePer)
	}
	return keep, nil
}

// drain calls del(limit) until it deletes fewer than limit or ctx ends,
// and returns the total.
func drain(ctx context.Context, limit int, del func(int) (int, error)) (int, error) {
	total := 0
	for {
		n, err := del(limit)
		total += n
		if err != nil || n < limit || ctx.Err() != nil {
			return total, err
		}
	}
}

// keepPurging runs Purge now and every PurgeEvery until ctx ends.
func (s *Service) keepPurging(ctx context.Context) {
	t := time.NewTicker(s.opts.PurgeEvery)
	defer t.Stop()
	for {
		events, runs, err := s.Purge(ctx, purgeBatch)
		switch {
		case err != nil && ctx.Err() == nil:
			s.opts.Logger.Warn("purge workflow history", "err", err, "events", events, "runs", runs)
		case events+runs > 0:
			s.opts.Logger.Info("purged workflow history", "events", events, "runs", runs, "retention", s.opts.Retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
