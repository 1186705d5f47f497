package workflow

import (
	"context"
	"time"
)

// purgeBatch is the rows Purge deletes per statement.
const purgeBatch = 1000

// Purged counts what Purge deleted.
type Purged struct {
	Events, Runs, Versions int
}

// Purge deletes the history past Retention: the events taken in before
// it, the runs that ended before it (completed, canceled, failed), and
// the versions of workflows that stopped being current before it and no
// live run is on (with the rows of keys deleted before it). Runs are kept
// longer while a current workflow's entry.once_per is longer than
// Retention, since once_per reads a user's past runs. Live runs are never
// deleted, however old, nor the versions they are on. It deletes limit
// rows (default 1,000) a statement until none are left or ctx ends. Every
// node's RunScheduler runs it every PurgeEvery; two nodes purging at once
// delete each row once.
func (s *Service) Purge(ctx context.Context, limit int) (Purged, error) {
	if limit <= 0 {
		limit = purgeBatch
	}
	var p Purged
	now := s.opts.Now()
	cut := now.Add(-s.opts.Retention)
	var err error
	if p.Events, err = drain(ctx, limit, func(n int) (int, error) {
		return s.opts.Store.DeleteWorkflowEventsBefore(ctx, cut, n)
	}); err != nil {
		return p, err
	}
	keep, err := s.runsKept(ctx)
	if err != nil {
		return p, err
	}
	if p.Runs, err = drain(ctx, limit, func(n int) (int, error) {
		return s.opts.Store.DeleteEndedRunsBefore(ctx, now.Add(-keep), n)
	}); err != nil {
		return p, err
	}
	p.Versions, err = s.opts.Store.DeleteUnusedWorkflowVersions(ctx, cut, limit)
	return p, err
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
		p, err := s.Purge(ctx, purgeBatch)
		switch {
		case err != nil && ctx.Err() == nil:
			s.opts.Logger.Warn("purge workflow history", "err", err, "events", p.Events, "runs", p.Runs, "versions", p.Versions)
		case p != Purged{}:
			s.opts.Logger.Info("purged workflow history", "events", p.Events, "runs", p.Runs, "versions", p.Versions,
				"retention", s.opts.Retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
