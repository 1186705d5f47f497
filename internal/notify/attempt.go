package notify

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// attempt is one run of [Service.Process] at a delivery: the job, the
// delivery as read when the run began, the claim once made and what the
// provider calls said. It belongs to the goroutine running Process.
type attempt struct {
	s     *Service
	j     Job
	d     Delivery
	now   time.Time // when the run began
	claim Claim     // the attempt's claim, once made
	sent  sendResult
}

// begin reads j's delivery and returns the attempt to make at it, or nil
// and what Process returns when there is none: nil for a delivery done
// with (final, deleted, or a stale copy of a job rescheduled for later),
// an error wrapping ErrInFlight while another worker holds its claim, or
// the store's error. A delivery whose claim lapsed (its worker died) is
// claimed for this attempt.
func (s *Service) begin(ctx context.Context, j Job) (*attempt, error) {
	d, err := s.delivery(ctx, j)
	if apperr.Is(err, apperr.NotFound) {
		return nil, nil // deleted by retention meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("read delivery %s: %w", j.Key(), err)
	}
	a := &attempt{s: s, j: j, d: d, now: s.now()}
	switch {
	case d.Status == StatusSending && d.ClaimUntil.After(a.now):
		return nil, fmt.Errorf("%w: %s is claimed until %s", ErrInFlight, j.Key(), d.ClaimUntil.Format(time.RFC3339Nano))
	case d.Status == StatusSending: // its worker is gone: take it over
		if a.claim, err = s.claim(ctx, j, d); err != nil {
			return nil, ignoreSettled(err)
		}
	case d.Status != StatusQueued || d.NextAttemptAt.After(a.now):
		return nil, nil // done already, or a stale copy of a job rescheduled for later
	}
	a.j.Attempt = d.Attempts
	return a, nil
}

// callContext is the context of the attempt's provider calls, and the
// function to call once they are over. Once the delivery is claimed, the
// claim's lease is renewed while the calls run (see renewClaim), and the
// calls end well before ClaimFor, so no other worker takes the delivery
// over while one is in flight; a claim found taken over cuts them off.
func (a *attempt) callContext(ctx context.Context) (context.Context, func()) {
	if a.claim.Owner == "" {
		return ctx, func() {}
	}
	// (A duration, not claim.Until: the clock may be a test's.)
	callCtx, cancel := context.WithTimeout(ctx, a.s.opts.ClaimFor*3/4)
	stop := a.s.renewClaim(callCtx, cancel, a.claim)
	return callCtx, func() { stop(); cancel() }
}

// settle records what the attempt's provider calls came to: sent; back in
// the queue when ctx ended during the calls; deferred without spending an
// attempt when no provider was called; otherwise what the retry rule
// decides for the failure.
func (a *attempt) settle(ctx context.Context) error {
	s, j, d := a.s, a.j, a.d
	sendErr := a.sent.err
	attempts := d.Attempts + 1
	if sendErr == nil {
		return a.finish(ctx, Outcome{Status: StatusSent}, attempts, "")
	}
	if ctx.Err() != nil {
		// Shutting down: the call's fate is unknown; put the delivery
		// back in the queue so the redelivered job tries again (at least
		// once) without waiting for the claim to lapse.
		if a.claim.Owner != "" {
			_ = a.finish(ctx, Outcome{Status: StatusQueued}, d.Attempts, "")
		}
		return ctx.Err()
	}
	permanent, retryAfter := classify(sendErr)
	if ErrorClass(sendErr) == ClassUnavailable {
		// No provider was called (breakers open, pacing): wait in the
		// queue without spending an attempt.
		return a.finish(ctx, s.deferral(d, retryAfter), d.Attempts, errorText(sendErr))
	}
	o := s.rule(j).decide(s.now(), d.CreatedAt, d.ExpiresAt, attempts, permanent, retryAfter, s.opts.Rand)
	level := slog.LevelInfo
	if o.Status != StatusQueued {
		level = slog.LevelWarn
	}
	s.log.Log(ctx, level, "delivery attempt failed", logKeyNotification, j.NotificationID, logKeyChannel, j.Channel,
		"attempts", attempts, "outcome", o.Status, logKeyError, sendErr)
	return a.finish(ctx, o, attempts, errorText(sendErr))
}

// finish stores the attempt's outcome o, with the attempts spent so far
// and msg as the delivery's error, and a dead letter when o asks for one.
// When the store took it (no other copy of the job finished first), it
// commits a sent receipt, tells Observe and emits the status event. It
// fails only when the store does.
func (a *attempt) finish(ctx context.Context, o Outcome, attempts int, msg string) error {
	s, j, sent := a.s, a.j, a.sent
	rec := Attempt{Key: j.Key(), Status: o.Status, Prev: a.d.Attempts, Attempts: attempts, Error: msg, NextAttemptAt: o.NextAttemptAt,
		At: s.now(), Claim: a.claim.Owner,
		Provider: sent.provider, ProviderMessageID: sent.receipt.ProviderMessageID, Hops: sent.hops, Urgent: j.Category.Urgent()}
	if o.Status == StatusSent {
		rec.Outbox, rec.Inbox = sent.receipt.Outbox, sent.receipt.Inbox
	}
	var dl *DeadLetter
	if o.DeadLetter {
		dl = &DeadLetter{ID: NewID("dl_", rec.At), NotificationID: j.NotificationID, Channel: j.Channel,
			UserID: j.UserID, Error: msg, Attempts: attempts, CreatedAt: rec.At}
	}
	stored, err := s.opts.Store.FinishAttempt(context.WithoutCancel(ctx), rec, dl)
	if err != nil {
		return fmt.Errorf("record attempt %s: %w", j.Key(), err)
	}
	if !stored {
		return nil
	}
	if o.Status == StatusSent && sent.receipt.Committed != nil {
		sent.receipt.Committed(context.WithoutCancel(ctx))
	}
	if s.opts.Observe != nil {
		s.opts.Observe(Observation{Channel: j.Channel, Category: j.Category, Status: o.Status,
			Latency: rec.At.Sub(time.UnixMicro(j.CreatedAt))})
	}
	s.emitDelivery(ctx, StatusEvent{NotificationID: j.NotificationID, UserID: j.UserID, NotificationType: j.Type,
		Category: j.Category, Channel: j.Channel, Status: o.Status, Attempts: attempts, Error: msg,
		Provider: cmp.Or(rec.Provider, a.d.Provider), At: rec.At})
	return nil
}
