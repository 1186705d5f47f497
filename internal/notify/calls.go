package notify

import (
	"context"
	"errors"
	"slices"
	"sync"
)

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
	if m.Channel == Push && len(*tokens) > 1 {
		return s.sendTokens(ctx, j, p, m, tokens)
	}
	if m.Channel == Push && len(*tokens) == 1 {
		m.To = (*tokens)[0]
	}
	rc, h, err := s.call(ctx, p, m)
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

// call makes one call to p, cut at SendTimeout, and returns it as a hop
// too.
func (s *Service) call(ctx context.Context, p Provider, m Message) (Receipt, Hop, error) {
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

// tokenCall is one push token's call.
type tokenCall struct {
	rc  Receipt
	hop Hop
	err error
}

// callTokens calls p with m once for each token, up to 4 at once, and
// returns the calls in the tokens' order.
func (s *Service) callTokens(ctx context.Context, p Provider, m Message, tokens []string) []tokenCall {
	calls := make([]tokenCall, len(tokens))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			mm := m
			mm.To = tok
			rc, h, err := s.call(ctx, p, mm)
			h.To = TokenRef(tok)
			calls[i] = tokenCall{rc, h, err}
		})
	}
	wg.Wait()
	return calls
}

// sendTokens sends a push message to every token in *tokens (see
// sendEach), forgets the tokens the provider reports gone and leaves in
// *tokens those still to reach.
func (s *Service) sendTokens(ctx context.Context, j Job, p Provider, m Message, tokens *[]string) (Receipt, []Hop, error) {
	var (
		hops       []Hop
		errs       []error
		left, gone []string
		first      Receipt
		reached    bool
	)
	for i, c := range s.callTokens(ctx, p, m, *tokens) {
		hops = append(hops, c.hop)
		switch {
		case c.err == nil:
			if !reached {
				first, reached = c.rc, true
			}
		case errors.Is(c.err, ErrUnregistered):
			gone = append(gone, (*tokens)[i])
		default:
			left = append(left, (*tokens)[i])
			errs = append(errs, c.err)
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
