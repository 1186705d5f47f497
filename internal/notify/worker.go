package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Process handles one job from the queue: it sends the delivery at most
// once per attempt and records the outcome. It returns nil when the job is
// done with (sent, retried later, dropped, or a stale copy), so the queue
// may acknowledge it, and an error only when it could not reach the store
// or ctx ended: the queue then redelivers the job later.
func (s *Service) Process(ctx context.Context, j Job) error {
	d, err := s.delivery(ctx, j)
	if apperr.Is(err, apperr.NotFound) {
		return nil // deleted by retention meanwhile
	}
	if err != nil {
		return fmt.Errorf("read delivery %s: %w", j.Key(), err)
	}
	now := s.now()
	if d.Status != StatusQueued || d.NextAttemptAt.After(now) {
		return nil // done already, or a stale copy of a job rescheduled for later
	}
	j.Attempt = d.Attempts
	var sent sendResult // what the provider calls said, for the record
	finish := func(o Outcome, attempts int, msg string) error {
		a := Attempt{Key: j.Key(), Status: o.Status, Prev: d.Attempts, Attempts: attempts, Error: msg, NextAttemptAt: o.NextAttemptAt, At: s.now(),
			Provider: sent.provider, ProviderMessageID: sent.receipt.ProviderMessageID, Hops: sent.hops, Urgent: j.Category.Urgent()}
		if o.Status == StatusSent {
			a.Outbox = sent.receipt.Outbox
		}
		var dl *DeadLetter
		if o.DeadLetter {
			dl = &DeadLetter{ID: newID("dl_", a.At), NotificationID: j.NotificationID, Channel: j.Channel,
				UserID: j.UserID, Error: msg, Attempts: attempts, CreatedAt: a.At}
		}
		stored, err := s.opts.Store.FinishAttempt(ctx, a, dl)
		if err != nil {
			return fmt.Errorf("record attempt %s: %w", j.Key(), err)
		}
		if stored && s.opts.Observe != nil {
			s.opts.Observe(Observation{Channel: j.Channel, Category: j.Category, Status: o.Status,
				Latency: a.At.Sub(time.UnixMicro(j.CreatedAt))})
		}
		return nil
	}
	if j.Expired(now) {
		return finish(Outcome{Status: StatusExpired}, d.Attempts, "expired before it could be sent")
	}
	st, err := s.sharedSettings(ctx, j.UserID) // read only
	if err != nil {
		return err
	}
	p := s.opts.Providers[j.Channel]
	if p == nil {
		return finish(Outcome{Status: StatusFailed}, d.Attempts, "no provider for channel "+string(j.Channel))
	}
	m, err := s.render(ctx, j, st)
	if apperr.Is(err, apperr.NotFound) {
		return finish(s.rule(j).decide(now, d.CreatedAt, d.ExpiresAt, d.Attempts+1, true, 0, s.opts.Rand),
			d.Attempts+1, "no template for type "+j.Type)
	}
	if err != nil {
		return err
	}
	if p.NeedsContact() && m.To == "" {
		return finish(Outcome{Status: StatusSuppressed}, d.Attempts, ReasonNoContact)
	}
	for _, rw := range s.opts.Rewriters {
		out, err := rw.Rewrite(ctx, m)
		if err != nil {
			s.log.Warn("rewriter failed; sending the message unchanged", logKeyNotification, j.NotificationID, logKeyError, err)
			continue
		}
		m = out
	}
	sent = s.deliver(ctx, j, st, p, m)
	sendErr := sent.err
	attempts := d.Attempts + 1
	if sendErr == nil {
		return finish(Outcome{Status: StatusSent}, attempts, "")
	}
	if ctx.Err() != nil {
		// Shutting down: the call's fate is unknown; leave the delivery
		// queued so the redelivered job tries again (at least once).
		return ctx.Err()
	}
	permanent, retryAfter := classify(sendErr)
	if ErrorClass(sendErr) == ClassUnavailable {
		// No provider was called (breakers open, pacing): wait in the
		// queue without spending an attempt.
		return finish(s.deferral(d, retryAfter), d.Attempts, errorText(sendErr))
	}
	o := s.rule(j).decide(s.now(), d.CreatedAt, d.ExpiresAt, attempts, permanent, retryAfter, s.opts.Rand)
	level := slog.LevelInfo
	if o.Status != StatusQueued {
		level = slog.LevelWarn
	}
	s.log.Log(ctx, level, "delivery attempt failed", logKeyNotification, j.NotificationID, logKeyChannel, j.Channel,
		"attempts", attempts, "outcome", o.Status, logKeyError, sendErr)
	return finish(o, attempts, errorText(sendErr))
}

// delivery returns the state of j's delivery: from the store, or, for the
// first run of a job this node published (see freshSet), the state it was
// saved with.
func (s *Service) delivery(ctx context.Context, j Job) (Delivery, error) {
	if j.Attempt == 0 && j.Due == 0 && !j.Redelivered && s.fresh.take(j.Key()) {
		return Delivery{NotificationID: j.NotificationID, Channel: j.Channel, UserID: j.UserID, Category: j.Category,
			Status: StatusQueued, CreatedAt: time.UnixMicro(j.CreatedAt).UTC(), ExpiresAt: j.ExpiresTime()}, nil
	}
	return s.opts.Store.Delivery(ctx, j.Key())
}

func (s *Service) rule(j Job) RetryRule { return s.opts.Retry[j.Category] }

// errorText is what a delivery shows of an error: short, one line.
func errorText(err error) string {
	msg := err.Error()
	if se, ok := errors.AsType[*SendError](err); ok {
		msg = se.Err.Error()
	}
	if len(msg) > 500 {
		msg = msg[:500]
	}
	return msg
}

// RecoveryAfter is how long a queued delivery may wait unhandled before the
// recovery sweep republishes it.
func (s *Service) RecoveryAfter() time.Duration { return s.opts.RecoveryAfter }
