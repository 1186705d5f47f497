package notify

import (
	"context"
	"errors"
)

// Cancel cancels notification id's deliveries that no worker has claimed:
// those still queued, whether due now, waiting for a retry or for the end
// of quiet hours, move to [StatusCanceled] in one store transaction and
// are never sent. A delivery a worker has claimed (sending) or finished is
// left alone, so the answer is the truth: the record as it stands after
// the cancel, where canceled deliveries show canceled and the others show
// sending, sent or whatever they reached. A cancel and a worker's claim of
// the same delivery are decided by the store (see
// [Store.CancelDeliveries]): the delivery is sent or canceled, never both.
// Canceling again changes nothing and answers the same; an unknown id is
// apperr NotFound.
func (s *Service) Cancel(ctx context.Context, id string) (Record, error) {
	now := s.now()
	chs, err := s.opts.Store.CancelDeliveries(ctx, id, now)
	if err != nil {
		return Record{}, err
	}
	rec, err := s.Notification(ctx, id)
	if err != nil {
		return Record{}, err
	}
	if s.opts.Observe != nil {
		for _, ch := range chs {
			s.opts.Observe(Observation{Channel: ch, Category: rec.Category, Status: StatusCanceled,
				Latency: now.Sub(rec.CreatedAt)})
		}
	}
	return rec, nil
}

// CancelOutcome sums up what canceling rec achieved, from its deliveries'
// statuses (so a repeated cancel reports the same): "canceled" when every
// delivery that was live is canceled, "partly_canceled" when some are and
// others were sending or sent already, "not_canceled" when none is.
func CancelOutcome(rec Record) string {
	canceled, live := 0, 0
	for _, d := range rec.Deliveries {
		switch d.Status {
		case StatusCanceled:
			canceled++
		case StatusSuppressed:
		default:
			live++
		}
	}
	switch {
	case canceled == 0:
		return "not_canceled"
	case live == 0:
		return "canceled"
	default:
		return "partly_canceled"
	}
}

// errSettled is what claim returns when the delivery turned out final
// (canceled meanwhile, or finished by another copy of the job): the job
// is done with, not in flight.
var errSettled = errors.New("delivery settled")

// settled reports whether a claim of j's delivery lost because the
// delivery is final now rather than held by another worker.
func (s *Service) settled(ctx context.Context, j Job) bool {
	d, err := s.opts.Store.Delivery(ctx, j.Key())
	return err == nil && d.Status.Terminal()
}

// ignoreSettled returns nil for errSettled (the job is done with) and err
// otherwise.
func ignoreSettled(err error) error {
	if errors.Is(err, errSettled) {
		return nil
	}
	return err
}
