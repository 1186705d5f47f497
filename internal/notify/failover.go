package notify

import (
	"context"
	"errors"
	"slices"
	"time"
)

// sendResult is what one attempt's provider calls came to.
type sendResult struct {
	receipt Receipt
	// provider names the provider that accepted the message when it is
	// not the delivery's own (a backup, another channel's).
	provider string
	// hops are every call of the attempt when there was more than one.
	hops []Hop
	err  error
}

// failover reports whether category c uses backup providers and other
// channels.
func (s *Service) failover(c Category) bool { return slices.Contains(s.opts.Failover, c) }

// deliver makes one attempt at m. The channel's provider is called first;
// for failover categories, when it is unavailable (its breaker is open: the
// provider is down, as opposed to one call failing), the channel's backups
// are tried in order, and when all of them are unavailable, the user's other
// enabled channels that have no delivery of their own in this notification.
// A call that fails ends the attempt: the retry rule decides (a timeout is
// retried quickly on the same provider, and enough of them open its
// breaker). The first provider that accepts ends it too.
//
// The result's error decides what happens next: a temporary failure
// anywhere makes it temporary; all calls refused unavailable keep it
// unavailable (wait without spending an attempt); otherwise permanent.
func (s *Service) deliver(ctx context.Context, j Job, st Settings, primary Provider, m Message) sendResult {
	chain := []Provider{primary}
	if s.failover(j.Category) {
		chain = append(chain, s.opts.Backups[j.Channel]...)
	}
	var hops []Hop
	var errs []error
	try := func(p Provider, m Message) (Receipt, bool) {
		sendCtx, cancel := context.WithTimeout(ctx, s.opts.SendTimeout)
		rc, err := p.Send(sendCtx, m)
		cancel()
		h := Hop{Provider: p.Name(), Channel: m.Channel, Result: ErrorClass(err), At: s.now()}
		if err != nil {
			h.Error = errorText(err)
			errs = append(errs, err)
			if errors.Is(err, ErrUnregistered) {
				s.forgetContact(ctx, j.UserID, m.Channel, m.To)
			}
		}
		hops = append(hops, h)
		return rc, err == nil
	}
	done := func(rc Receipt, p Provider) sendResult {
		r := sendResult{receipt: rc, provider: rc.Provider}
		if len(hops) > 1 {
			r.hops = hops
		}
		if p != primary && r.provider == "" {
			r.provider = p.Name()
		}
		return r
	}
	for _, p := range chain {
		if rc, ok := try(p, m); ok {
			return done(rc, p)
		}
		if ctx.Err() != nil || ErrorClass(errs[len(errs)-1]) != ClassUnavailable {
			break
		}
	}
	if s.failover(j.Category) && ctx.Err() == nil && ErrorClass(worstOf(errs)) == ClassUnavailable {
		for _, ch := range s.fallbackChannels(ctx, j, st) {
			jj := j
			jj.Channel = ch
			fm, err := s.render(ctx, jj, st)
			if err != nil {
				continue
			}
			fm.IdempotencyKey = m.IdempotencyKey
			for _, p := range append([]Provider{s.opts.Providers[ch]}, s.opts.Backups[ch]...) {
				if rc, ok := try(p, fm); ok {
					return done(rc, p)
				}
				if ctx.Err() != nil || ErrorClass(errs[len(errs)-1]) != ClassUnavailable {
					break
				}
			}
			if ctx.Err() != nil || ErrorClass(errs[len(errs)-1]) != ClassUnavailable {
				break // one real call per attempt at most: the retry rule takes over
			}
		}
	}
	r := sendResult{err: worstOf(errs)}
	if len(hops) > 1 {
		r.hops = hops
	}
	return r
}

// worstOf picks the error that decides a failed attempt's fate.
func worstOf(errs []error) error {
	var unavailable, permanent error
	for _, err := range errs {
		switch ErrorClass(err) {
		case ClassTemporary:
			return err
		case ClassUnavailable:
			unavailable = err
		default:
			permanent = err
		}
	}
	if unavailable != nil {
		return unavailable
	}
	return permanent
}

// fallbackChannels are the channels a failover message may try after its
// own: enabled in the user's settings, with a provider and a contact, and
// without a delivery of their own in the notification (which is on its
// way already).
func (s *Service) fallbackChannels(ctx context.Context, j Job, st Settings) []Channel {
	rec, err := s.opts.Store.Notification(ctx, j.NotificationID)
	if err != nil {
		return nil
	}
	var out []Channel
	for _, ch := range Channels {
		p := s.opts.Providers[ch]
		if ch == j.Channel || !st.Channels[ch] || p == nil || (p.NeedsContact() && st.Contacts.contactFor(ch) == "") {
			continue
		}
		if slices.ContainsFunc(rec.Deliveries, func(d Delivery) bool { return d.Channel == ch && d.Status != StatusSuppressed }) {
			continue
		}
		out = append(out, ch)
	}
	return out
}

// deferral is the outcome of an attempt no provider took: queued again
// after the wait they asked for (at least a second), or expired when that
// is past the notification's expiry.
func (s *Service) deferral(d Delivery, wait time.Duration) Outcome {
	next := s.now().Add(max(wait, time.Second))
	if !d.ExpiresAt.IsZero() && !next.Before(d.ExpiresAt) {
		return Outcome{Status: StatusExpired}
	}
	return Outcome{Status: StatusQueued, NextAttemptAt: next}
}

// forgetContact removes an address a provider says is gone for good (an
// unregistered push token) from the user's stored contacts, so later
// messages do not try it. Failures are logged: the next message tries again.
func (s *Service) forgetContact(ctx context.Context, user string, ch Channel, addr string) {
	if ch != Push || addr == "" {
		return
	}
	st, found, err := s.opts.Store.Settings(ctx, user)
	if err != nil || !found {
		return
	}
	i := slices.Index(st.Contacts.PushTokens, addr)
	if i < 0 {
		return
	}
	st.Contacts.PushTokens = slices.Delete(st.Contacts.PushTokens, i, i+1)
	if err := s.opts.Store.PutSettings(ctx, user, st); err != nil {
		s.log.Warn("could not remove an unregistered push token", logKeyError, err)
		return
	}
	s.settings.forget(user)
	s.log.Info("removed an unregistered push token", "user_id", user)
}
