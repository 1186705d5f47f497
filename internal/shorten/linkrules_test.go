package shorten_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

// TestSetRulesCachedAndStale: rules set on a link apply at once on this
// node, even to a link cached before with a long TTL; they are read again
// from the store once the entry expires, and they stay with a stale entry
// answering while the store fails. Only the link's owner may set them.
func TestSetRulesCachedAndStale(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *shorten.Options) { o.CacheTTL, o.StaleTTL = 30*time.Second, time.Hour })
	ctx := t.Context()
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com/page", Owner: "key_1"})
	if _, err := b.svc.Resolve(ctx, l.Code, "c"); err != nil {
		t.Fatal(err)
	}
	rules := []shorten.Rule{{Name: "de", If: shorten.Conditions{Language: []string{"de"}}, URL: "https://example.de/"}}
	if _, err := b.svc.SetRules(ctx, shorten.Caller{ID: "key_2"}, l.Code, rules); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("SetRules by another key = %v, want NotFound", err)
	}
	if _, err := b.svc.SetRules(ctx, shorten.Caller{ID: "key_1"}, l.Code, rules); err != nil {
		t.Fatalf("SetRules: %v", err)
	}
	german := shorten.Visit{AcceptLanguage: "de"}
	choose := func() (shorten.Target, error) {
		tg, err := b.svc.Resolve(ctx, l.Code, "c")
		return b.svc.Choose(tg, german), err
	}
	before := b.store.lookups.Load()
	if got, err := choose(); err != nil || got.URL != "https://example.de/" || got.Rule != "de" {
		t.Errorf("right after SetRules: %+v, %v; want the rule's target", got, err)
	}
	if b.store.lookups.Load() != before {
		t.Error("the new rules were read from the store, not cached by SetRules")
	}
	b.clock.Advance(time.Minute) // past the cache TTL: read again from the store
	if got, err := choose(); err != nil || got.Rule != "de" || b.store.lookups.Load() == before {
		t.Errorf("past the cache TTL: %+v, %v; want the rules read again from the store", got, err)
	}
	b.store.down.Store(true)
	b.clock.Advance(time.Minute)
	if got, err := choose(); err != nil || got.URL != "https://example.de/" {
		t.Errorf("stale while the store fails: %+v, %v; want the rules kept with the stale entry", got, err)
	}
	if got := b.svc.Choose(shorten.Target{URL: "https://example.com/x"}, german); got.Rule != "" || got.URL != "https://example.com/x" {
		t.Errorf("Choose on a target without rules = %+v, want it unchanged", got)
	}
}

// TestSetRulesOnSpecialLinkAnnouncesChange: a link with visit limits (never
// announced whole) has its code announced as changed once its new rules
// are stored, so another node that forgets it on hearing this reads the
// rules from the store; a plain link's new form is announced whole
// instead, and not as a change.
func TestSetRulesOnSpecialLinkAnnouncesChange(t *testing.T) {
	t.Parallel()
	var (
		b         *bundle
		changed   []string
		storedNow []int
	)
	b = setup(t, func(o *shorten.Options) {
		o.CacheTTL = time.Hour
		o.Announce = func(code string) error {
			changed = append(changed, code)
			l, err := b.store.DB.LinkByCode(t.Context(), "", code)
			if err != nil {
				t.Errorf("LinkByCode(%q) while announcing: %v", code, err)
			}
			storedNow = append(storedNow, len(l.Rules))
			return nil
		}
		o.AnnounceCreated = func(string, shorten.CachedLink) error { return nil }
	})
	ctx := t.Context()
	owner := shorten.Caller{ID: "key_1"}
	plain := b.create(t, shorten.CreateRequest{URL: "https://example.com/plain", Owner: owner.ID})
	limited := b.create(t, shorten.CreateRequest{URL: "https://example.com/once", Owner: owner.ID, LinkExtras: shorten.LinkExtras{MaxVisits: 5}})
	rules := []shorten.Rule{{Name: "de", If: shorten.Conditions{Language: []string{"de"}}, URL: "https://example.de/"}}
	for _, code := range []string{plain.Code, limited.Code} {
		if _, err := b.svc.SetRules(ctx, owner, code, rules); err != nil {
			t.Fatalf("SetRules(%s): %v", code, err)
		}
	}
	if len(changed) != 1 || changed[0] != limited.Code || storedNow[0] != 1 {
		t.Fatalf("announced as changed %q with %v rules stored; want only the visit-limited link, after its rule was stored", changed, storedNow)
	}
	// What the announcement does on another node: Forget, then the next
	// redirect reads the store and gets the rules.
	b.svc.Forget(limited.Code)
	before := b.store.lookups.Load()
	tg, err := b.svc.Resolve(ctx, limited.Code, "c")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.svc.Choose(tg, shorten.Visit{AcceptLanguage: "de"}); got.Rule != "de" || b.store.lookups.Load() == before {
		t.Errorf("after Forget: %+v; want the rules read again from the store", got)
	}
}
