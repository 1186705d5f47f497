package notify

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// sendResult is what one attempt's provider calls came to.
type sendResult struct {
	receipt Receipt
	// provider names the provider that accepted the message when it is
	// not the delivery's own (a backup, another channel's).
	provider string
	// hops are the attempt's calls, to record on the delivery (see
	// recordHops).
	hops []Hop
	err  error
}

// failover reports whether category c uses backup providers and other
// channels.
func (s *Service) failover(c Category) bool { return slices.Contains(s.opts.Failover, c) }

// The failover chain of a delivery in a failover category has three links:
// the channel's provider, its backups, the user's other enabled channels.
// Which link an attempt starts from follows the time the delivery has
// left: the provider has the first half of the window from acceptance to
// the deadline (expires_at, or the retry rule's MaxAge), its backups the
// third quarter, other channels the last quarter. So a critical message
// whose provider keeps failing retries quickly on it, then moves to the
// backup, then to another channel, each before it expires. A link with no
// providers leaves its time to the link before.
const (
	linkPrimary = iota
	linkBackups
	linkChannels
)

// stage returns the link an attempt at now starts from.
func (s *Service) stage(j Job, created time.Time, now time.Time) int {
	if !s.failover(j.Category) {
		return linkPrimary
	}
	deadline := j.ExpiresTime()
	if deadline.IsZero() {
		deadline = created.Add(cmp.Or(s.rule(j).MaxAge, time.Hour))
	}
	window := deadline.Sub(created)
	if window <= 0 {
		return linkPrimary
	}
	switch gone := now.Sub(created); {
	case gone >= window*3/4:
		return linkChannels
	case gone >= window/2:
		return linkBackups
	}
	return linkPrimary
}

// deliver makes one attempt at m. It starts at the chain's link for the
// attempt's time (see stage): the channel's provider, else its backups,
// else the user's other enabled channels that have no delivery of their
// own in this notification. Within the attempt it goes on down the chain
// while a provider is unavailable (its breaker is open: the provider is
// down, as opposed to one call failing) or refuses for reasons of its own
// (a ProviderFault: credentials, account), for failover categories only.
// Any other failed call ends the attempt: the retry rule decides. The
// first provider that accepts ends it too.
//
// A push message goes to each of the user's tokens not yet reached (one
// call per token, see sendEach); it is sent when every token took it or
// is gone.
//
// The result's error decides what happens next: a temporary failure
// anywhere makes it temporary; all calls refused unavailable keep it
// unavailable (wait without spending an attempt); otherwise permanent.
func (s *Service) deliver(ctx context.Context, j Job, d Delivery, st Settings, primary Provider, m Message) sendResult {
	w := &chainWalk{s: s, j: j, tokens: pendingTokens(st, d.Hops)}
	start := s.stage(j, d.CreatedAt, s.now())
	fallback := s.failover(j.Category) && ctx.Err() == nil
	// From the channels' link on, other channels first; with no other
	// channel, this one keeps trying.
	channels := fallback && start == linkChannels && len(s.fallbackChannels(ctx, j, st)) > 0
	if !channels {
		if rc, p, ok := w.first(ctx, s.chain(j, start, primary), m); ok {
			return w.result(rc, p, primary)
		}
		fallback = fallback && w.goOn(ctx)
	}
	if fallback {
		if rc, p, ok := w.otherChannels(ctx, st, m); ok {
			return w.result(rc, p, primary)
		}
	}
	return sendResult{err: worstOf(w.errs), hops: w.hops}
}

// chain returns the providers on the delivery's own channel an attempt
// starting at link start tries, in order: the channel's provider alone;
// for a failover category, its backups after it, or from the backups'
// link on the backups alone (when the channel has some).
func (s *Service) chain(j Job, start int, primary Provider) []Provider {
	backups := s.opts.Backups[j.Channel]
	switch {
	case !s.failover(j.Category):
		return []Provider{primary}
	case start == linkPrimary || len(backups) == 0:
		return append([]Provider{primary}, backups...)
	}
	return backups
}

// chainWalk is one attempt's way down the failover chain (see deliver):
// the calls made so far and the push tokens still to reach. It belongs to
// the goroutine running the attempt.
type chainWalk struct {
	s      *Service
	j      Job
	tokens []string // push tokens no call has reached yet
	hops   []Hop
	errs   []error // of the failed calls, in order
}

// first tries providers in order with m until one takes it (then ok is
// true, with its receipt and the provider) or a failure ends the attempt
// (see goOn).
func (w *chainWalk) first(ctx context.Context, providers []Provider, m Message) (rc Receipt, p Provider, ok bool) {
	for _, p := range providers {
		rc, hs, err := w.s.sendEach(ctx, w.j, p, m, &w.tokens)
		w.hops = append(w.hops, hs...)
		if err == nil {
			return rc, p, true
		}
		w.errs = append(w.errs, err)
		if !w.goOn(ctx) {
			break
		}
	}
	return Receipt{}, nil, false
}

// goOn reports whether the last failure lets the attempt try the next
// provider of the chain: the provider was unavailable (no call made), or,
// for a failover category, refused for reasons of its own.
func (w *chainWalk) goOn(ctx context.Context) bool {
	if ctx.Err() != nil || len(w.errs) == 0 {
		return false
	}
	last := w.errs[len(w.errs)-1]
	return ErrorClass(last) == ClassUnavailable || (w.s.failover(w.j.Category) && IsProviderFault(last))
}

// otherChannels tries the user's other channels (see fallbackChannels) in
// turn, each rendered for its channel and sent through its provider and
// backups, while the failures let the attempt go on.
func (w *chainWalk) otherChannels(ctx context.Context, st Settings, m Message) (Receipt, Provider, bool) {
	s, j := w.s, w.j
	for _, ch := range s.fallbackChannels(ctx, j, st) {
		if !s.fallbackAllowed(ctx, j, ch, st) {
			continue
		}
		jj := j
		jj.Channel = ch
		fm, err := s.render(ctx, jj, st)
		if err != nil {
			continue
		}
		fm.IdempotencyKey = m.IdempotencyKey
		if rc, p, ok := w.first(ctx, append([]Provider{s.opts.Providers[ch]}, s.opts.Backups[ch]...), fm); ok {
			return rc, p, true
		}
		if !w.goOn(ctx) {
			break // one real call per attempt at most: the retry rule takes over
		}
	}
	return Receipt{}, nil, false
}

// result is the attempt's result when p took the message with receipt rc.
func (w *chainWalk) result(rc Receipt, p, primary Provider) sendResult {
	r := sendResult{receipt: rc, provider: rc.Provider, hops: w.hops}
	if p != primary && r.provider == "" {
		r.provider = p.Name()
	}
	return r
}

// maxHops bounds the hops kept on a delivery: the latest are kept.
const maxHops = 32

// recordHops returns the hops to store on d after an attempt made calls:
// the earlier attempts' and this one's, when there is more to tell than
// "the channel's provider took it at once": several calls, a provider other
// than the channel's own, a failed call of a failover category, or a push
// to several tokens (each token's result is kept, so a retry skips the
// tokens that took it).
func (s *Service) recordHops(j Job, d Delivery, primary Provider, r sendResult) []Hop {
	tell := len(d.Hops) > 0 || len(r.hops) > 1
	if len(r.hops) == 1 {
		h := r.hops[0]
		tell = tell || h.Provider != primary.Name() || h.Channel != j.Channel || (r.err != nil && s.failover(j.Category)) || h.To != ""
	}
	if !tell {
		return nil
	}
	all := append(slices.Clone(d.Hops), r.hops...)
	if len(all) > maxHops {
		all = all[len(all)-maxHops:]
	}
	return all
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
	if IsSystemUser(j.UserID) {
		return nil // a status event goes to its subscription or nowhere
	}
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
