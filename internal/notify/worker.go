package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Process handles one job: it sends the delivery at most once per attempt
// and records the outcome. It returns nil when the job is done with (sent,
// retried later, dropped, or a stale copy), so the queue may acknowledge it,
// and an error when it could not reach the store or ctx ended, or (wrapping
// [ErrInFlight]) when another worker holds the delivery's claim: the queue
// then delivers the job again later.
//
// Before the first provider call the worker claims the delivery (status
// sending, see [Store.ClaimDelivery]): a copy of the job redelivered to
// any node while the call is in flight finds the claim and waits for it
// instead of calling the provider again. A claim that lapses (its worker
// died) is taken over by the next copy of the job.
func (s *Service) Process(ctx context.Context, j Job) error {
	a, err := s.begin(ctx, j)
	if a == nil {
		return err // nothing to do, claimed by another worker, or the store failed
	}
	j, d := a.j, a.d
	if j.Expired(a.now) {
		return a.finish(ctx, Outcome{Status: StatusExpired}, d.Attempts, "expired before it could be sent")
	}
	if conditions, ok := pendingEscalation(d); ok {
		how, err := s.engaged(ctx, j.Key(), conditions)
		if err != nil {
			return err
		}
		if how != "" {
			return a.finish(ctx, Outcome{Status: StatusSuppressed}, d.Attempts, ReasonEngaged+": "+how)
		}
	}
	st, err := s.sharedSettings(ctx, j.UserID) // read only
	if err != nil {
		return err
	}
	p := s.provider(j)
	if p == nil {
		return a.finish(ctx, Outcome{Status: StatusFailed}, d.Attempts, "no provider for channel "+string(j.Channel))
	}
	m, err := s.render(ctx, j, st)
	if apperr.Is(err, apperr.NotFound) {
		return a.finish(ctx, s.rule(j).decide(a.now, d.CreatedAt, d.ExpiresAt, d.Attempts+1, true, 0, s.opts.Rand),
			d.Attempts+1, "no template for type "+j.Type)
	}
	if err != nil {
		return err
	}
	if p.NeedsContact() && m.To == "" {
		return a.finish(ctx, Outcome{Status: StatusSuppressed}, d.Attempts, ReasonNoContact)
	}
	m = s.rewrite(ctx, j, m)
	if a.claim.Owner == "" && s.needsClaim(j, p) {
		if a.claim, err = s.claim(ctx, j, d); err != nil {
			return ignoreSettled(err)
		}
	}
	callCtx, done := a.callContext(ctx)
	a.sent = s.deliver(callCtx, j, d, st, p, m)
	done()
	a.sent.hops = s.recordHops(j, d, p, a.sent)
	return a.settle(ctx)
}

// rewrite runs the rewriters on m, in order; one that fails is logged and
// passed over.
func (s *Service) rewrite(ctx context.Context, j Job, m Message) Message {
	for _, rw := range s.opts.Rewriters {
		out, err := rw.Rewrite(ctx, m)
		if err != nil {
			s.log.Warn("rewriter failed; sending the message unchanged", logKeyNotification, j.NotificationID, logKeyError, err)
			continue
		}
		m = out
	}
	return m
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

// ErrInFlight is wrapped by the error [Service.Process] returns for a copy
// of a job whose delivery another worker has claimed: the queue should
// deliver it again later (the claim is over by then, or has lapsed).
var ErrInFlight = errors.New("delivery in flight")

// claim claims j's delivery d for this attempt, or fails wrapping
// ErrInFlight when another copy of the job won it.
func (s *Service) claim(ctx context.Context, j Job, d Delivery) (Claim, error) {
	now := s.now()
	c := Claim{Key: j.Key(), Prev: d.Attempts, Owner: NewID("clm_", now), At: now, Until: now.Add(s.opts.ClaimLease),
		Urgent: j.Category.Urgent()}
	ok, err := s.opts.Store.ClaimDelivery(ctx, c)
	if err != nil {
		return Claim{}, fmt.Errorf("claim delivery %s: %w", j.Key(), err)
	}
	if ok && d.Status == StatusSending {
		s.log.Warn("took over the lapsed claim of a delivery; the call of the worker that held it may have reached the provider",
			logKeyNotification, j.NotificationID, logKeyChannel, j.Channel, "claim_until", d.ClaimUntil)
		if s.opts.Observe != nil {
			s.opts.Observe(Observation{Channel: j.Channel, Category: j.Category, TakenOver: true})
		}
	}
	if !ok {
		if s.settled(ctx, j) { // canceled, or finished by another copy
			return Claim{}, errSettled
		}
		return Claim{}, fmt.Errorf("%w: %s was claimed by another worker", ErrInFlight, j.Key())
	}
	return c, nil
}

// renewClaim renews c every third of the claim lease until the returned
// stop is called or ctx ends, never past ClaimFor from the claim; when
// the claim is found lost (another worker took it over after a renewal
// failed to land in time) it cancels the call with cancel. stop waits for
// a renewal under way.
func (s *Service) renewClaim(ctx context.Context, cancel context.CancelFunc, c Claim) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(s.opts.ClaimLease / 3)
		defer tick.Stop()
		limit := c.At.Add(s.opts.ClaimFor)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if c.Until = s.now().Add(s.opts.ClaimLease); c.Until.After(limit) {
				c.Until = limit
			}
			ok, err := s.opts.Store.ExtendClaim(ctx, c)
			if err != nil {
				s.log.Debug("could not renew a delivery's claim; trying again", logKeyNotification, c.Key.NotificationID, logKeyError, err)
				continue
			}
			if !ok {
				s.log.Warn("a delivery's claim was taken over during its provider call; cutting the call off",
					logKeyNotification, c.Key.NotificationID, logKeyChannel, c.Key.Channel)
				cancel()
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// needsClaim reports whether an attempt at j through p claims the delivery
// first. Every provider that calls out does; a provider whose sending is a
// row stored with the outcome (the outbox, see [StoredSender]) needs none,
// as that write is conditional already, unless the attempt may fail over
// to other providers.
func (s *Service) needsClaim(j Job, p Provider) bool {
	ss, ok := p.(StoredSender)
	return !ok || !ss.SendsInStore() || s.failover(j.Category)
}

// StoredSender is optional for a Provider: SendsInStore reports that its
// Send calls nothing outside and hands back the message as a
// Receipt.Outbox or Receipt.Inbox row, stored with the attempt's outcome.
type StoredSender interface {
	SendsInStore() bool
}

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

// provider returns the provider that sends j's delivery: Options.System
// for a system notification, else the channel's.
func (s *Service) provider(j Job) Provider {
	if IsSystemUser(j.UserID) {
		return s.opts.System
	}
	return s.opts.Providers[j.Channel]
}

// sharedSettings is Settings without the copy: its maps and slices are
// the cache's, shared with other callers, so the caller must not change
// them. The pipeline reads settings twice per delivery; copying them each
// time was a measurable share of a campaign's allocations.
func (s *Service) sharedSettings(ctx context.Context, user string) (Settings, error) {
	return s.settings.get(ctx, user, func(ctx context.Context) (Settings, error) {
		st, found, err := s.opts.Store.Settings(ctx, user)
		if err != nil || !found {
			return s.defaults, err
		}
		st.fill()
		return st, nil
	})
}

// render builds the message for job j from its template and the user's
// settings.
func (s *Service) render(ctx context.Context, j Job, st Settings) (Message, error) {
	if IsSystemUser(j.UserID) {
		return systemMessage(j), nil
	}
	t, err := s.Template(ctx, j.Type)
	if err != nil {
		return Message{}, err
	}
	content, _ := t.Content(j.Channel, st.Locale)
	data, err := decodeData(j.Data)
	if err != nil {
		return Message{}, err
	}
	m := Message{
		NotificationID: j.NotificationID, Channel: j.Channel, UserID: j.UserID, Type: j.Type,
		Category: j.Category, To: st.Contacts.contactFor(j.Channel),
		Subject: Render(content.Subject, data), Body: Render(content.Body, data),
		Data: j.Data, IdempotencyKey: j.Key().String(), Attempt: j.Attempt + 1,
		CreatedAt: time.UnixMicro(j.CreatedAt).UTC(),
	}
	if j.Channel == Email {
		if content.HTML != "" {
			m.HTML = RenderHTML(content.HTML, data)
		}
		m.TrackLinks, m.NoTrack = t.TrackLinks, NoTrackValues(data, content.Body, content.HTML)
	}
	if j.ExpiresAt != 0 {
		m.ExpiresAt = time.UnixMicro(j.ExpiresAt).UTC()
	}
	return m, nil
}
