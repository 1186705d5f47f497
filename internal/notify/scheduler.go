package notify

import (
	"context"
	"time"
)

// SchedulerOptions tune [Service.RunScheduler]. Zero fields take defaults.
type SchedulerOptions struct {
	// Tick is how often due retries and delayed deliveries are queued.
	// If zero, one second.
	Tick time.Duration
	// SweepEvery is how often the recovery sweep looks for lost jobs.
	// If zero, half of RecoveryAfter.
	SweepEvery time.Duration
	// PurgeEvery is how often history older than History is deleted.
	// If zero, one hour.
	PurgeEvery time.Duration
	// Batch bounds the rows each step handles per round. If zero, 1000.
	Batch int
}

// RunScheduler runs the pipeline's background steps until ctx ends: it
// queues deliveries whose retry, quiet-hours or escalation delay is due,
// sends the digests whose window ended, republishes
// deliveries whose job was lost (the recovery sweep), and deletes old
// history. Every Sluice node may run one: the queue's deduplication makes
// concurrent republishing harmless. It returns ctx's error.
func (s *Service) RunScheduler(ctx context.Context, o SchedulerOptions) error {
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = s.opts.RecoveryAfter / 2
	}
	if o.PurgeEvery <= 0 {
		o.PurgeEvery = time.Hour
	}
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	tick := time.NewTicker(o.Tick)
	defer tick.Stop()
	var lastSweep, lastPurge time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if _, err := s.QueueDue(ctx, o.Batch); err != nil && ctx.Err() == nil {
			s.log.Warn("queue due deliveries", logKeyError, err)
		}
		if _, err := s.SendDueDigests(ctx, o.Batch); err != nil && ctx.Err() == nil {
			s.log.Warn("send due digests", logKeyError, err)
		}
		now := s.now()
		if now.Sub(lastSweep) >= o.SweepEvery {
			lastSweep = now
			if _, err := s.Recover(ctx, o.Batch); err != nil && ctx.Err() == nil {
				s.log.Warn("recovery sweep", logKeyError, err)
			}
		}
		if now.Sub(lastPurge) >= o.PurgeEvery {
			lastPurge = now
			if _, err := s.PurgeHistory(ctx, o.Batch); err != nil && ctx.Err() == nil {
				s.log.Warn("purge history", logKeyError, err)
			}
		}
	}
}

// QueueDue publishes up to limit deliveries whose retry or delay is due and
// marks them queued; it returns how many it published.
func (s *Service) QueueDue(ctx context.Context, limit int) (int, error) {
	jobs, err := s.opts.Store.DueDeliveries(ctx, s.now(), limit)
	if err != nil || len(jobs) == 0 {
		return 0, err
	}
	return s.republish(ctx, jobs)
}

// Recover is the recovery sweep: it republishes up to limit deliveries per
// queue that have been queued, not delayed, for longer than RecoveryAfter
// and older than everything the queue still holds (when the queue can say),
// so only jobs that were never published, or were lost, go again. The
// queue drops copies of jobs it still holds by their message id, and the
// worker drops copies of deliveries already handled.
func (s *Service) Recover(ctx context.Context, limit int) (int, error) {
	total := 0
	for _, ch := range Channels {
		for _, c := range Categories {
			before := s.now().Add(-s.opts.RecoveryAfter)
			if h, ok := s.opts.Queue.(QueueHorizon); ok {
				horizon, err := h.Horizon(ctx, ch, c)
				if err != nil {
					return total, err
				}
				// A second of slack for clocks of different machines.
				if horizon = horizon.Add(-time.Second); horizon.Before(before) {
					before = horizon
				}
			}
			jobs, err := s.opts.Store.StaleDeliveries(ctx, ch, c, before, limit)
			if err != nil {
				return total, err
			}
			if len(jobs) > 0 {
				s.log.Info("recovery sweep republishing", logKeyChannel, ch, "category", c, "count", len(jobs))
			}
			n, err := s.republish(ctx, jobs)
			total += n
			if err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

func (s *Service) republish(ctx context.Context, jobs []Job) (int, error) {
	keys := make([]DeliveryKey, 0, len(jobs))
	for _, j := range jobs {
		if err := s.opts.Queue.Publish(ctx, j); err != nil {
			return 0, err
		}
		keys = append(keys, j.Key())
	}
	return len(keys), s.opts.Store.MarkQueued(ctx, keys, s.now())
}

// PurgeHistory deletes notifications older than History, limit at a time
// until none are left or ctx ends, and returns how many it deleted.
func (s *Service) PurgeHistory(ctx context.Context, limit int) (int, error) {
	total := 0
	for {
		n, err := s.opts.Store.DeleteNotificationsBefore(ctx, s.now().Add(-s.opts.History), limit)
		total += n
		if err != nil || n < limit || ctx.Err() != nil {
			return total, err
		}
	}
}
