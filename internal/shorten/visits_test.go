package shorten_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

// ConsumeVisit counts the store's visit updates.
func (s *countingStore) ConsumeVisit(ctx context.Context, linkID int64) (bool, error) {
	s.visits.Add(1)
	return s.DB.ConsumeVisit(ctx, linkID)
}

// recordingCache is a shared cache in memory that remembers what was set
// and announced, to show which links reach the other nodes.
type recordingCache struct {
	mu  sync.Mutex
	set map[string]shorten.CachedLink
}

func (c *recordingCache) Get(_ context.Context, code string) (shorten.CachedLink, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.set[code]
	return l, ok, nil
}

func (c *recordingCache) Set(_ context.Context, code string, l shorten.CachedLink, _ time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set[code] = l
	return nil
}

func (c *recordingCache) Delete(_ context.Context, code string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.set, code)
	return nil
}

func TestLinksWithExtrasAreNeverSharedNorAnnounced(t *testing.T) {
	t.Parallel()
	shared := &recordingCache{set: map[string]shorten.CachedLink{}}
	var announced []string
	b := setup(t, func(o *shorten.Options) {
		o.Shared = shared
		o.AnnounceCreated = func(code string, _ shorten.CachedLink) error { announced = append(announced, code); return nil }
	})
	ctx := t.Context()
	plain := b.create(t, shorten.CreateRequest{URL: "https://example.com/plain"})
	for _, x := range []shorten.LinkExtras{{MaxVisits: 1}, {FallbackURL: "https://example.com/fb"}, {ClickIDs: true}} {
		l := b.create(t, shorten.CreateRequest{URL: "https://example.com/x", LinkExtras: x})
		if _, err := b.svc.Resolve(ctx, l.Code, "198.51.100.1"); err != nil {
			t.Fatal(err)
		}
		if _, ok := shared.set[l.Code]; ok {
			t.Errorf("link with %+v went to the shared cache, whose entries carry no extras", x)
		}
	}
	if _, ok := shared.set[plain.Code]; !ok || len(announced) != 1 || announced[0] != plain.Code {
		t.Errorf("plain link shared %v, announced %q; want it shared and the only one announced", ok, announced)
	}
}

func TestVisitSpendsExactlyMaxVisits(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *shorten.Options) { o.FallbackURL = "https://example.com/server-fallback" })
	ctx := t.Context()
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com/once", LinkExtras: shorten.LinkExtras{MaxVisits: 2}})
	var got []string
	for range 3 {
		tg, err := b.svc.Resolve(ctx, l.Code, "198.51.100.1")
		if err != nil || !tg.Limited {
			t.Fatalf("Resolve = %+v, %v; want a limited target", tg, err)
		}
		tg, err = b.svc.Visit(ctx, tg)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tg.URL)
		if tg.URL == "https://example.com/server-fallback" && (!tg.UsedUp || !tg.Expired) {
			t.Errorf("used-up target %+v, want UsedUp and Expired", tg)
		}
	}
	want := []string{"https://example.com/once", "https://example.com/once", "https://example.com/server-fallback"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("three visits of max_visits 2 went to %q, want %q (the server's fallback once used up)", got, want)
		}
	}
	// Used up is for ever: later hits do not write to the store.
	before := b.store.visits.Load()
	for range 5 {
		tg, _ := b.svc.Resolve(ctx, l.Code, "198.51.100.1")
		if tg, err := b.svc.Visit(ctx, tg); err != nil || !tg.UsedUp {
			t.Fatalf("Visit of a used-up link = %+v, %v", tg, err)
		}
	}
	if n := b.store.visits.Load() - before; n != 0 {
		t.Errorf("5 hits on a used-up link asked the store %d times, want 0", n)
	}
	// Expiry wins over visits left, and the link's own fallback over the server's.
	exp := b.create(t, shorten.CreateRequest{URL: "https://example.com/soon", ExpiresAt: b.clock.Now().Add(time.Minute),
		LinkExtras: shorten.LinkExtras{MaxVisits: 5, FallbackURL: "https://example.com/own-fallback"}})
	b.clock.Advance(2 * time.Minute)
	if tg, err := b.svc.Resolve(ctx, exp.Code, "198.51.100.1"); err != nil || !tg.Expired || tg.URL != "https://example.com/own-fallback" {
		t.Errorf("expired limited link = %+v, %v; want its own fallback", tg, err)
	}
}

func TestCreateValidatesExtras(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, tc := range []struct {
		name  string
		x     shorten.LinkExtras
		field string
	}{
		{"negative max_visits", shorten.LinkExtras{MaxVisits: -1}, "max_visits"},
		{"huge max_visits", shorten.LinkExtras{MaxVisits: shorten.MaxVisitsLimit + 1}, "max_visits"},
		{"fallback not http", shorten.LinkExtras{FallbackURL: "javascript:alert(1)"}, "fallback_url"},
		{"fallback on our own host", shorten.LinkExtras{FallbackURL: "https://sho.rt/abc"}, "fallback_url"},
	} {
		_, err := b.svc.Create(t.Context(), shorten.CreateRequest{URL: "https://example.com/", LinkExtras: tc.x})
		e, ok := err.(*apperr.Error)
		if !ok || e.Code != apperr.Unprocessable || len(e.Fields) != 1 || e.Fields[0].Field != tc.field {
			t.Errorf("%s: Create = %v, want Unprocessable naming %s", tc.name, err, tc.field)
		}
	}
}

func TestNotificationLinksGetClickIDsWhenAsked(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		b := setup(t, func(o *shorten.Options) { o.NotificationClickIDs = on })
		l, err := b.svc.ShortenForNotification(t.Context(), "ntf_1", "https://example.com/order")
		if err != nil {
			t.Fatal(err)
		}
		if l.ClickIDs != on {
			t.Errorf("NotificationClickIDs %v: link ClickIDs = %v", on, l.ClickIDs)
		}
	}
}

func TestConversionCreditsTheNotification(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *shorten.Options) { o.NotificationClickIDs = true })
	ctx := t.Context()
	l, err := b.svc.ShortenForNotification(ctx, "ntf_7", "https://example.com/order")
	if err != nil {
		t.Fatal(err)
	}
	id, err := b.svc.NewClickID(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	c, created, err := b.svc.Convert(ctx, shorten.Caller{Admin: true}, id, "sale", 42)
	if err != nil || !created || c.NotificationID != "ntf_7" || c.LinkID != l.ID {
		t.Fatalf("Convert = %+v, %v, %v; want a conversion of the link credited to ntf_7", c, created, err)
	}
	if tot, err := b.svc.NotificationConversions(ctx, "ntf_7"); err != nil || tot.Count != 1 || tot.Value != 42 {
		t.Errorf("NotificationConversions = %+v, %v", tot, err)
	}
	links, _ := b.svc.NotificationLinks(ctx, "ntf_7")
	if len(links) != 1 || links[0].Conversions != 1 {
		t.Errorf("notification links = %+v, want one with 1 conversion", links)
	}
	if err := b.svc.Delete(ctx, shorten.Caller{Admin: true}, l.Code); err != nil {
		t.Fatal(err)
	}
	other, _ := b.svc.NewClickID(l.ID)
	if _, _, err := b.svc.Convert(ctx, shorten.Caller{Admin: true}, other, "sale", 1); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("Convert on a deleted link = %v, want NotFound", err)
	}
}
