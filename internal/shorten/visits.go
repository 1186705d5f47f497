package shorten

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// LinkExtras are the optional behaviours of a link. The zero value is a
// plain link: no visit limit, the server's fallback URL, no click ids;
// such a link stays on the cached fast path, untouched by anything here.
type LinkExtras struct {
	// MaxVisits, when above zero, is how many human visits the link lets
	// through; later ones answer 410 or redirect to the fallback URL.
	// Every node asks the store for each visit (VisitStore.ConsumeVisit),
	// so the count is exact across nodes, never a node's cache's guess.
	MaxVisits int64
	// FallbackURL is where the link redirects once expired or used up,
	// instead of the server's Options.FallbackURL or a 410.
	FallbackURL string
	// ClickIDs makes each redirect append a signed click id (the
	// sluice_cid query parameter) to the target, for POST /v1/conversions.
	ClickIDs bool
}

// special reports whether a link needs more than the plain redirect.
func (x LinkExtras) special() bool { return x.MaxVisits > 0 || x.FallbackURL != "" || x.ClickIDs }

// MaxVisitsLimit bounds max_visits.
const MaxVisitsLimit = 1_000_000_000

// VisitStore is the store's atomic visit counter; *store.DB is one.
type VisitStore interface {
	// ConsumeVisit counts one visit of the visit-limited link id if it has
	// visits left, in one atomic conditional update, and reports whether it
	// did. A link without a limit, or gone, reports false.
	ConsumeVisit(ctx context.Context, linkID int64) (bool, error)
}

// validateExtras checks x as given to Create.
func (s *Service) validateExtras(x LinkExtras) []apperr.FieldError {
	var fields []apperr.FieldError
	if x.MaxVisits < 0 || x.MaxVisits > MaxVisitsLimit {
		fields = append(fields, apperr.FieldError{Field: "max_visits", Detail: fmt.Sprintf("must be from 1 to %d", MaxVisitsLimit)})
	}
	if x.FallbackURL != "" {
		if _, err := s.opts.Targets.ValidateTarget(x.FallbackURL); err != nil {
			fields = append(fields, apperr.FieldError{Field: "fallback_url", Detail: err.Error()})
		}
	}
	return fields
}

// Visit is the second step of a redirect to a visit-limited link (a
// Target with Limited set): it spends one of the link's visits in the
// store. When none is left the answer is the link's fallback (Target.Gone
// set, URL the fallback or empty for 410). Bots must not call it: a link
// preview fetcher opening a one-time link would use it up (see
// ClassifyHit; Service.Redirect answers bots without a visit).
func (s *Service) Visit(ctx context.Context, t Target) (Target, error) {
	vs, ok := s.store.(VisitStore)
	if !ok {
		return Target{}, apperr.New(apperr.Unavailable, "this store cannot count visits")
	}
	if !s.spent.has(t.LinkID) {
		ok, err := vs.ConsumeVisit(ctx, t.LinkID)
		if err != nil {
			return Target{}, fmt.Errorf("consume visit of link %d: %w", t.LinkID, err)
		}
		if ok {
			s.metrics.Found()
			s.metrics.VisitSpent()
			return t, nil
		}
		s.spent.add(t.LinkID)
	}
	s.metrics.Expired()
	s.metrics.VisitRefused()
	return Target{LinkID: t.LinkID, URL: t.Fallback, Expired: true, UsedUp: true}, nil
}

// cacheSpecial caches a link with extras read from the store. Such links
// are never put in the shared cache nor announced, whose encodings carry
// no extras: a node always learns them from the store.
func (s *Service) cacheSpecial(code string, l Link, now time.Time) *entry {
	until := now.Add(s.opts.CacheTTL)
	x := l.LinkExtras
	e := &entry{id: l.ID, url: l.URL, expiresAt: micros(l.ExpiresAt), rules: compileRules(l.ID, l.Rules), until: until.UnixMicro(),
		keep: until.Add(s.opts.StaleTTL).UnixMicro(), extra: &x}
	s.links.put(code, e)
	return e
}

// specialTarget is target for a link with extras.
func (s *Service) specialTarget(e *entry, now int64) Target {
	fallback := cmp.Or(e.extra.FallbackURL, s.opts.FallbackURL)
	if e.expired(now) {
		s.metrics.Expired()
		return Target{LinkID: e.id, URL: fallback, Expired: true, Fallback: fallback}
	}
	t := Target{LinkID: e.id, URL: e.url, Rules: e.rules, Limited: e.extra.MaxVisits > 0, ClickIDs: e.extra.ClickIDs, Fallback: fallback}
	if !t.Limited {
		s.metrics.Found() // a limited link is counted by Visit
	}
	return t
}

// spentLinksMax bounds the used-up links a node remembers.
const spentLinksMax = 100_000

// spentLinks remembers links whose visits are all spent: a link never gets
// visits back (max_visits does not change), so once the store has said so
// this node answers their later hits without writing to it. Safe for
// concurrent use; bounded and crude, as forgetting only costs a write.
type spentLinks struct {
	mu sync.Mutex
	m  map[int64]struct{}
}

func (s *spentLinks) has(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[id]
	return ok
}

func (s *spentLinks) add(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= spentLinksMax {
		s.m = make(map[int64]struct{})
	}
	s.m[id] = struct{}{}
}
