package shorten

import (
	"context"
	"log/slog"

	"github.com/sluicehq/sluice/internal/apperr"
)

// SetRules replaces the redirect rules of the link with code, which the
// caller must own; no rules removes them. Invalid rules are an apperr
// Unprocessable error whose fields name each bad rule and field
// ("rules[1].if.os[0]"). The new rules are cached here and in the shared
// cache at once, and announced to the other nodes as the link's new form
// (Options.AnnounceCreated), which they cache in place of the old one;
// a node that misses the announcement sees them within CacheTTL. A link
// with visit limits, a fallback or click ids is never shared nor
// announced whole (the encodings do not carry those): its code is
// announced as changed (Options.Announce), and the other nodes drop their
// entry and read the store at its next redirect.
func (s *Service) SetRules(ctx context.Context, caller Caller, code string, rules []Rule) (Link, error) {
	if _, err := s.Get(ctx, caller, code); err != nil {
		return Link{}, err
	}
	if len(rules) == 0 {
		rules = nil
	}
	fields := ValidateRules(rules, s.opts.Targets, s.opts.Geo != nil)
	if err := apperr.Fields(apperr.Unprocessable, "the link's rules are invalid", fields); err != nil {
		return Link{}, err
	}
	domain, bare := SplitKey(code)
	l, err := s.store.SetLinkRules(ctx, domain, bare, rules)
	if err != nil {
		return Link{}, err
	}
	now := s.now()
	if l.special() {
		// Never shared nor announced whole (see share): the other nodes
		// forget their entry and read the store again.
		s.cacheSpecial(code, l, now)
		s.announceChanged(code)
		return l, nil
	}
	s.cacheLink(code, l.ID, l.URL, l.ExpiresAt, compileRules(l.ID, l.Rules), now)
	s.share(ctx, l, now)
	s.announceCreated(l)
	return l, nil
}

// Choose applies t's rules to a visit: the first rule that matches sets
// t.URL, and t.Rule says which rule it was (DefaultTarget when none did,
// leaving the link's own URL). A target without rules, or of an expired
// link, is returned as it is. Service.Redirect calls it only when
// t.Rules is set, so links without rules pay nothing.
func (s *Service) Choose(t Target, v Visit) Target {
	if t.Rules == nil || t.Expired {
		return t
	}
	url, label := t.Rules.choose(v, s.opts.Geo)
	if url != "" {
		t.URL = url
	}
	t.Rule = label
	return t
}

// sharedRules compiles the rules of a link read from the shared cache or
// heard of from another node. Rules that do not decode (written by a
// newer node in a form this one does not know) are dropped with a
// warning: the link then redirects to its own URL until its entry is read
// again.
func (s *Service) sharedRules(code string, cl CachedLink) *RuleSet {
	if cl.Rules == "" {
		return nil
	}
	rules, err := DecodeRules(cl.Rules)
	if err != nil {
		s.log.Warn("a cached link's rules do not decode; redirecting to its URL", slog.String("code", code), slog.Any("error", err))
		return nil
	}
	return compileRules(cl.ID, rules)
}
