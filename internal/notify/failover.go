package notify

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
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
	var hops []Hop
	var errs []error
	tokens := pendingTokens(st, d.Hops)
	try := func(p Provider, m Message) (Receipt, bool) {
		rc, hs, err := s.sendEach(ctx, j, p, m, &tokens)
		hops = append(hops, hs...)
		if err != nil {
			errs = append(errs, err)
		}
		return rc, err == nil
	}
	done := func(rc Receipt, p Provider) sendResult {
		r := sendResult{receipt: rc, provider: rc.Provider, hops: hops}
		if p != primary && r.provider == "" {
			r.provider = p.Name()
		}
		return r
	}
	// goOn reports whether the last failure lets the attempt try the next
	// provider of the chain.
	goOn := func() bool {
		if ctx.Err() != nil || len(errs) == 0 {
			return false
		}
		last := errs[len(errs)-1]
		return ErrorClass(last) == ClassUnavailable || (s.failover(j.Category) && IsProviderFault(last))
	}
	var chain []Provider
	start := s.stage(j, d.CreatedAt, s.now())
	backups := s.opts.Backups[j.Channel]
	if start == linkPrimary || len(backups) == 0 || !s.failover(j.Category) {
		chain = append(chain, primary)
	}
	if s.failover(j.Category) {
		chain = append(chain, backups...)
	}
	fallback := s.failover(j.Category) && ctx.Err() == nil
	channels := fallback && start == linkChannels
	if channels && len(s.fallbackChannels(ctx, j, st)) == 0 {
		channels = false // no other channel: this one keeps trying
	}
	if !channels {
		for _, p := range chain {
			if rc, ok := try(p, m); ok {
				return done(rc, p)
			}
			if !goOn() {
				break
			}
		}
		fallback = fallback && goOn()
	}
	if fallback {
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
			for _, p := range append([]Provider{s.opts.Providers[ch]}, s.opts.Backups[ch]...) {
				if rc, ok := try(p, fm); ok {
					return done(rc, p)
				}
				if !goOn() {
					break
				}
			}
			if !goOn() {
				break // one real call per attempt at most: the retry rule takes over
			}
		}
	}
	return sendResult{err: worstOf(errs), hops: hops}
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

// forgetTokens removes several unregistered push tokens at once.
func (s *Service) forgetTokens(ctx context.Context, user string, gone []string) {
	if len(gone) == 0 {
		return
	}
	st, found, err := s.opts.Store.Settings(ctx, user)
	if err != nil || !found {
		return
	}
	n := len(st.Contacts.PushTokens)
	st.Contacts.PushTokens = slices.DeleteFunc(st.Contacts.PushTokens, func(t string) bool { return slices.Contains(gone, t) })
	if len(st.Contacts.PushTokens) == n {
		return
	}
	if err := s.opts.Store.PutSettings(ctx, user, st); err != nil {
		s.log.Warn("could not remove unregistered push tokens", logKeyError, err)
		return
	}
	s.settings.forget(user)
	s.log.Info("removed unregistered push tokens", "user_id", user, "count", n-len(st.Contacts.PushTokens))
}

// sendEach makes one provider's calls for m: one call to m.To, or, for a
// push message, one per token in *tokens (up to 4 at once), which it
// shrinks to the tokens still to reach. Each call is a hop (a push hop
// names its token by TokenRef). Tokens the provider reports unregistered
// are removed from the user's settings.
//
// A push call set succeeds when every token took the message or is gone
// and at least one took it; otherwise its error is the worst of the
// failed tokens' (every token gone is permanent, ErrUnregistered).
func (s *Service) sendEach(ctx context.Context, j Job, p Provider, m Message, tokens *[]string) (Receipt, []Hop, error) {
	call := func(m Message) (Receipt, Hop, error) {
		sendCtx, cancel := context.WithTimeout(ctx, s.opts.SendTimeout)
		rc, err := p.Send(sendCtx, m)
		cancel()
		h := Hop{Provider: p.Name(), Channel: m.Channel, Result: ErrorClass(err), At: s.now()}
		if err != nil {
			h.Error = errorText(err)
		}
		if rc.Provider != "" {
			h.Provider = rc.Provider
		}
		return rc, h, err
	}
	if m.Channel != Push || len(*tokens) <= 1 {
		if m.Channel == Push && len(*tokens) == 1 {
			m.To = (*tokens)[0]
		}
		rc, h, err := call(m)
		if m.Channel == Push && m.To != "" {
			h.To = TokenRef(m.To)
			if err == nil || errors.Is(err, ErrUnregistered) {
				*tokens = nil
			}
		}
		if errors.Is(err, ErrUnregistered) {
			s.forgetContact(ctx, j.UserID, m.Channel, m.To)
		}
		return rc, []Hop{h}, err
	}
	type result struct {
		rc  Receipt
		hop Hop
		err error
	}
	results := make([]result, len(*tokens))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, tok := range *tokens {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			mm := m
			mm.To = tok
			rc, h, err := call(mm)
			h.To = TokenRef(tok)
			results[i] = result{rc, h, err}
		})
	}
	wg.Wait()
	var (
		hops       []Hop
		errs       []error
		left, gone []string
		first      Receipt
		reached    bool
	)
	for i, r := range results {
		hops = append(hops, r.hop)
		switch {
		case r.err == nil:
			if !reached {
				first, reached = r.rc, true
			}
		case errors.Is(r.err, ErrUnregistered):
			gone = append(gone, (*tokens)[i])
		default:
			left = append(left, (*tokens)[i])
			errs = append(errs, r.err)
		}
	}
	s.forgetTokens(ctx, j.UserID, gone)
	*tokens = left
	switch {
	case len(left) == 0 && reached:
		return first, hops, nil
	case len(left) == 0:
		return Receipt{}, hops, Permanent(ErrUnregistered)
	}
	return Receipt{}, hops, worstOf(errs)
}

// pendingTokens returns the user's push tokens that no earlier attempt
// reached (a hop with result ok for the token), in order.
func pendingTokens(st Settings, hops []Hop) []string {
	var out []string
	for _, t := range st.Contacts.PushTokens {
		ref := TokenRef(t)
		if !slices.ContainsFunc(hops, func(h Hop) bool { return h.To == ref && h.Result == ClassOK }) {
			out = append(out, t)
		}
	}
	return out
}
