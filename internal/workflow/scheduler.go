package workflow

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/panics"
)

const (
	// wakeBuffer bounds the run ids Ingest hands this node's scheduler;
	// past it they wait for the next claim of due runs.
	wakeBuffer = 4096
	// workers advance runs at once on one node.
	workers = 4
)

// RunScheduler advances runs until ctx ends: every Tick it claims the due
// runs (ClaimDue, Batch at a time, again at once while batches come back
// full) and hands them to a few workers, which also take, at once, the
// runs this node's Ingest started or resumed (each claimed with
// ClaimRun first). Every node runs one; a claim keeps other nodes off a
// run for Lease, and a node that dies leaves its runs due again when
// their claims end. A run whose advance panics fails at its step; the
// workers go on. Beside them it counts the live runs and the users with
// attributes every CountEvery (the caps) and purges the history past
// Retention every PurgeEvery. It returns nil once ctx ends and all of
// them stopped.
func (s *Service) RunScheduler(ctx context.Context) error {
	claimed := make(chan Run)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { s.work(ctx, claimed) })
	}
	wg.Go(func() { s.keepCounting(ctx) })
	wg.Go(func() { s.keepPurging(ctx) })
	defer wg.Wait()
	t := time.NewTicker(s.opts.Tick)
	defer t.Stop()
	for {
		s.claimDue(ctx, claimed)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// claimDue claims due runs and hands them to the workers.
func (s *Service) claimDue(ctx context.Context, to chan<- Run) {
	for ctx.Err() == nil {
		runs, err := s.opts.Store.ClaimDue(ctx, s.opts.Now(), s.opts.Lease, s.opts.Batch)
		if err != nil {
			if ctx.Err() == nil {
				s.opts.Logger.Warn("claim due workflow runs", "err", err)
			}
			return
		}
		for _, r := range runs {
			select {
			case to <- r:
			case <-ctx.Done():
				return
			}
		}
		if len(runs) < s.opts.Batch {
			return
		}
	}
}

// work advances the runs claimed, and those Ingest woke.
func (s *Service) work(ctx context.Context, claimed <-chan Run) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-claimed:
			s.advance(ctx, r)
		case id := <-s.wake:
			s.claimAndAdvance(ctx, id)
		}
	}
}

// claimAndAdvance advances run id if it is due and no other node holds it.
func (s *Service) claimAndAdvance(ctx context.Context, id string) bool {
	r, ok, err := s.opts.Store.ClaimRun(ctx, id, s.opts.Now(), s.opts.Lease)
	if err != nil {
		if ctx.Err() == nil {
			s.opts.Logger.Warn("claim workflow run", "run_id", id, "err", err)
		}
		return false
	}
	if ok {
		s.advance(ctx, r)
	}
	return ok
}

// advance advances r (advanceRun) with its panics recovered: a panic is
// reported on the "workflow" surface and fails the run at the step it
// was at (written on the Seq of its last write), so the scheduler goes on
// and the run does not panic again at every claim.
func (s *Service) advance(ctx context.Context, r Run) {
	cur := r
	err := s.opts.Panics.Do(ctx, panics.Workflow, func() error { s.advanceRun(ctx, &cur); return nil },
		slog.String("run_id", r.ID), slog.String("workflow", r.Workflow))
	if !errors.Is(err, panics.ErrRecovered) {
		return
	}
	kind := ""
	if w, ok := s.defs.get(cur.Workflow, cur.Version); ok && cur.Position >= 0 && cur.Position < len(w.Steps) {
		kind = w.Steps[cur.Position].Kind
	}
	m := fail(cur, s.opts.Now(), kind, "internal error: the step panicked (the server log has the details)")
	m.run.UpdatedAt = s.opts.Now()
	err = s.opts.Panics.Do(ctx, panics.Workflow, func() error {
		_, err := s.opts.Store.UpdateRun(ctx, m.run, cur.Seq)
		return err
	}, slog.String("run_id", r.ID))
	switch {
	case err == nil:
		s.runEnded(cur.Workflow, StatusFailed)
	case !apperr.Is(err, apperr.Conflict) && ctx.Err() == nil:
		s.opts.Logger.Warn("workflow run that panicked not failed; it is due again when its claim ends", "run_id", r.ID, "err", err)
	}
}
