package workflow

import (
	"context"
	"sync"
	"time"
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
// their claims end. It returns nil once ctx ends and the workers stopped.
func (s *Service) RunScheduler(ctx context.Context) error {
	claimed := make(chan Run)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { s.work(ctx, claimed) })
	}
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
