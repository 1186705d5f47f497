package shorten_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// countingStore counts link lookups by code on a real store.
type countingStore struct {
	*store.DB
	lookups atomic.Int64
	gate    chan struct{} // when set, lookups wait for it
	down    atomic.Bool   // when set, lookups fail as a database restarting would
	flaky   atomic.Int32  // this many lookups fail as the store marks a restart (transient)
	visits  atomic.Int64  // ConsumeVisit calls (visits_test.go)
}

func (s *countingStore) LinkByCode(ctx context.Context, domain, code string) (shorten.Link, error) {
	s.lookups.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	if s.down.Load() {
		return shorten.Link{}, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	if s.flaky.Add(-1) >= 0 {
		return shorten.Link{}, apperr.MarkTransient(apperr.New(apperr.Unavailable, "database unavailable: connection refused"))
	}
	return s.DB.LinkByCode(ctx, domain, code)
}

type bundle struct {
	svc   *shorten.Service
	store *countingStore
	clock *ratelimittest.Clock
}

func setup(t testing.TB, tweak func(*shorten.Options)) *bundle {
	t.Helper()
	db := storetest.SQLite(t)
	codec, err := shorten.NewCodec([]byte("test key"), 7)
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{store: &countingStore{DB: db}, clock: ratelimittest.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))}
	opts := shorten.Options{
		Store: b.store, Codec: codec, BaseURL: "https://sho.rt",
		Targets: shorten.TargetPolicy{OwnHosts: []string{"sho.rt"}},
		Now:     b.clock.Now, Logger: slog.New(slog.DiscardHandler),
	}
	if tweak != nil {
		tweak(&opts)
	}
	b.svc, err = shorten.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bundle) create(t *testing.T, req shorten.CreateRequest) shorten.Link {
	t.Helper()
	l, err := b.svc.Create(t.Context(), req)
	if err != nil {
		t.Fatalf("Create(%+v): %v", req, err)
	}
	return l
}

const browser = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"

func TestCreateResolveAndCount(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := t.Context()
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com/page", Owner: "key_a"})
	if len(l.Code) != 7 || l.ID == 0 || !l.CreatedAt.Equal(b.clock.Now()) {
		t.Fatalf("Create = %+v, want a 7-character code, an id and the clock's time", l)
	}
	again := b.create(t, shorten.CreateRequest{URL: "https://example.com/page", Owner: "key_a"})
	if again.Code == l.Code {
		t.Errorf("the same URL twice got one code %q, want a record per request", l.Code)
	}
	if got := b.svc.ShortURL(l.Code); got != "https://sho.rt/"+l.Code {
		t.Errorf("ShortURL = %q", got)
	}

	for i := range 3 {
		tg, err := b.svc.Resolve(ctx, l.Code, "198.51.100.7")
		if err != nil || tg.URL != "https://example.com/page" || tg.Expired || tg.LinkID != l.ID {
			t.Fatalf("Resolve #%d = %+v, %v", i, tg, err)
		}
		b.svc.RecordHit(shorten.Hit{LinkID: tg.LinkID, UserAgent: browser, Client: "198.51.100.7"})
	}
	b.svc.RecordHit(shorten.Hit{LinkID: l.ID, Head: true, UserAgent: browser})
	b.svc.RecordHit(shorten.Hit{LinkID: l.ID, UserAgent: "Slackbot-LinkExpanding 1.0"})
	if n := b.store.lookups.Load(); n != 1 {
		t.Errorf("3 resolves made %d store lookups, want 1 (then the cache)", n)
	}
	got, err := b.svc.Get(ctx, shorten.Caller{ID: "key_a"}, l.Code)
	if err != nil || got.Clicks != 0 {
		t.Fatalf("Get before a flush = %+v, %v; want no clicks yet", got, err)
	}
	if err := b.svc.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	got, err = b.svc.Get(ctx, shorten.Caller{ID: "key_a"}, l.Code)
	if err != nil {
		t.Fatal(err)
	}
	if got.Clicks != 3 || got.BotHits != 2 || !got.FirstClickAt.Equal(b.clock.Now()) {
		t.Errorf("after flush: clicks %d, bot hits %d, first click %v; want 3, 2, %v", got.Clicks, got.BotHits, got.FirstClickAt, b.clock.Now())
	}
	if _, err := b.svc.Get(ctx, shorten.Caller{ID: "key_b"}, l.Code); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("Get by another key = %v, want NotFound", err)
	}
	if _, err := b.svc.Get(ctx, shorten.Caller{ID: "key_b", Admin: true}, l.Code); err != nil {
		t.Errorf("Get by an admin = %v", err)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.create(t, shorten.CreateRequest{URL: "https://example.com", Slug: "taken"})
	past := b.clock.Now().Add(-time.Second)
	tests := []struct {
		name  string
		req   shorten.CreateRequest
		code  apperr.Code
		field string
	}{
		{"no url", shorten.CreateRequest{}, apperr.Unprocessable, "url"},
		{"bad scheme", shorten.CreateRequest{URL: "ftp://example.com"}, apperr.Unprocessable, "url"},
		{"too long", shorten.CreateRequest{URL: "https://example.com/" + strings.Repeat("x", 2048)}, apperr.Unprocessable, "url"},
		{"own host", shorten.CreateRequest{URL: "https://sho.rt/abc"}, apperr.Unprocessable, "url"},
		{"loopback", shorten.CreateRequest{URL: "http://127.0.0.1/"}, apperr.Unprocessable, "url"},
		{"reserved slug", shorten.CreateRequest{URL: "https://example.com", Slug: "metrics"}, apperr.Unprocessable, "slug"},
		{"bad slug", shorten.CreateRequest{URL: "https://example.com", Slug: "a/b"}, apperr.Unprocessable, "slug"},
		{"taken slug", shorten.CreateRequest{URL: "https://example.com", Slug: "taken"}, apperr.Conflict, "slug"},
		{"past expiry", shorten.CreateRequest{URL: "https://example.com", ExpiresAt: past}, apperr.Unprocessable, "expires_at"},
		{"expiry now", shorten.CreateRequest{URL: "https://example.com", ExpiresAt: b.clock.Now()}, apperr.Unprocessable, "expires_at"},
	}
	for _, tt := range tests {
		_, err := b.svc.Create(t.Context(), tt.req)
		ae, ok := errors.AsType[*apperr.Error](err)
		if !ok || ae.Code != tt.code || len(ae.Fields) == 0 || ae.Fields[0].Field != tt.field {
			t.Errorf("%s: Create = %v, want %s naming %q", tt.name, err, tt.code, tt.field)
		}
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	for _, fallback := range []string{"", "https://example.com/expired"} {
		t.Run("fallback="+fallback, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(o *shorten.Options) { o.FallbackURL = fallback; o.ExpiredRetention = time.Hour })
			ctx := t.Context()
			l := b.create(t, shorten.CreateRequest{URL: "https://example.com/sale", ExpiresAt: b.clock.Now().Add(10 * time.Second)})
			if tg, err := b.svc.Resolve(ctx, l.Code, "c"); err != nil || tg.Expired {
				t.Fatalf("Resolve before expiry = %+v, %v", tg, err)
			}
			b.clock.Advance(10 * time.Second) // the cached entry is still trusted, but the link has expired
			tg, err := b.svc.Resolve(ctx, l.Code, "c")
			if err != nil || !tg.Expired || tg.URL != fallback {
				t.Fatalf("Resolve at expiry = %+v, %v; want expired with URL %q", tg, err, fallback)
			}
			if n := b.store.lookups.Load(); n != 1 {
				t.Errorf("%d store lookups, want 1: expiry is checked on the cached entry", n)
			}
			if n, err := b.svc.Purge(ctx); err != nil || n != 0 {
				t.Errorf("Purge within the retention = %d, %v; want 0", n, err)
			}
			b.clock.Advance(time.Hour + time.Second)
			if n, err := b.svc.Purge(ctx); err != nil || n != 1 {
				t.Errorf("Purge after the retention = %d, %v; want 1", n, err)
			}
			if _, err := b.store.DB.LinkByCode(ctx, "", l.Code); !apperr.Is(err, apperr.NotFound) {
				t.Errorf("purged link still stored: %v", err)
			}
		})
	}
}

func TestUnknownCodesCachedAndLimited(t *testing.T) {
	t.Parallel()
	var lim *ratelimit.PolicyLimiter
	b := setup(t, func(o *shorten.Options) {
		var err error
		lim, err = ratelimit.NewPolicyLimiter(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: o.Now}),
			ratelimit.Policy{Name: "u", Algorithm: ratelimit.TokenBucket, Limit: 3, Period: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		o.Limiter = lim
	})
	ctx := t.Context()
	for i := range 3 {
		if _, err := b.svc.Resolve(ctx, "nosuch", "203.0.113.1"); !errors.Is(err, shorten.ErrNotFound) || !apperr.Is(err, apperr.NotFound) {
			t.Fatalf("Resolve unknown #%d = %v, want ErrNotFound", i, err)
		}
	}
	if n := b.store.lookups.Load(); n != 1 {
		t.Errorf("3 lookups of one unknown code reached the store %d times, want 1 (negative cache)", n)
	}
	_, err := b.svc.Resolve(ctx, "other1", "203.0.113.1")
	le, ok := errors.AsType[*shorten.LimitedError](err)
	if !ok || !errors.Is(err, shorten.ErrLimited) || le.RetryAfter != 20*time.Second {
		t.Fatalf("4th unknown lookup = %v, want a LimitedError with RetryAfter 20s", err)
	}
	before := b.store.lookups.Load()
	if _, err := b.svc.Resolve(ctx, "other2", "203.0.113.1"); !errors.Is(err, shorten.ErrLimited) {
		t.Errorf("a limited client's lookup = %v, want ErrLimited", err)
	}
	if b.store.lookups.Load() != before {
		t.Error("a limited client's lookup reached the store")
	}
	if _, err := b.svc.Resolve(ctx, "nosuch", "203.0.113.2"); !errors.Is(err, shorten.ErrNotFound) {
		t.Errorf("another client = %v, want ErrNotFound", err)
	}
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com", Slug: "nosuch"})
	if tg, err := b.svc.Resolve(ctx, "nosuch", "203.0.113.2"); err != nil || tg.LinkID != l.ID {
		t.Errorf("a slug created after a 404 = %+v, %v; want found at once on this node", tg, err)
	}
	b.clock.Advance(20 * time.Second)
	if _, err := b.svc.Resolve(ctx, "other3", "203.0.113.1"); !errors.Is(err, shorten.ErrNotFound) {
		t.Errorf("after RetryAfter = %v, want ErrNotFound", err)
	}
	for i, code := range []string{"", "a/b", strings.Repeat("x", 65), "ünï"} {
		if _, err := b.svc.Resolve(ctx, code, fmt.Sprint("203.0.113.", 10+i)); !errors.Is(err, shorten.ErrNotFound) {
			t.Errorf("Resolve(%q) = %v, want ErrNotFound", code, err)
		}
	}
}

func TestOneLookupPerCodeInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com/hot"})
	b.store.gate = make(chan struct{})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if tg, err := b.svc.Resolve(context.Background(), l.Code, "c"); err != nil || tg.LinkID != l.ID {
				t.Errorf("Resolve = %+v, %v", tg, err)
			}
		})
	}
	for b.store.lookups.Load() == 0 {
		time.Sleep(time.Millisecond) // wait for the first lookup to start, not for a duration
	}
	close(b.store.gate)
	wg.Wait()
	if n := b.store.lookups.Load(); n != 1 {
		t.Errorf("50 concurrent misses made %d store lookups, want 1", n)
	}
}

func TestDeleteDropsTheCache(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := t.Context()
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com", Owner: "key_a"})
	if _, err := b.svc.Resolve(ctx, l.Code, "c"); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Delete(ctx, shorten.Caller{ID: "key_b"}, l.Code); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("Delete by another key = %v, want NotFound", err)
	}
	if err := b.svc.Delete(ctx, shorten.Caller{ID: "key_a"}, l.Code); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := b.svc.Resolve(ctx, l.Code, "c"); !errors.Is(err, shorten.ErrNotFound) {
		t.Errorf("Resolve after Delete = %v, want ErrNotFound", err)
	}
}

// TestDeleteAnnounces: Delete announces the code once the store no longer
// has it (a node forgetting it on hearing this must not find it again),
// and an announcement that fails does not fail the delete. Forget drops a
// cached link.
func TestDeleteAnnounces(t *testing.T) {
	t.Parallel()
	var (
		b          *bundle
		announced  []string
		afterwards []error
		fail       error
	)
	b = setup(t, func(o *shorten.Options) {
		o.Announce = func(code string) error {
			announced = append(announced, code)
			_, err := b.store.DB.LinkByCode(context.Background(), "", code)
			afterwards = append(afterwards, err)
			return fail
		}
	})
	ctx := t.Context()
	owner := shorten.Caller{ID: "key_a"}
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com/a", Owner: owner.ID})
	if err := b.svc.Delete(ctx, owner, l.Code); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if len(announced) != 1 || announced[0] != l.Code || !apperr.Is(afterwards[0], apperr.NotFound) {
		t.Errorf("announced %q with the store answering %v, want [%q] once the link is gone", announced, afterwards, l.Code)
	}

	fail = errors.New("nats: connection closed")
	l2 := b.create(t, shorten.CreateRequest{URL: "https://example.com/b", Owner: owner.ID})
	if err := b.svc.Delete(ctx, owner, l2.Code); err != nil {
		t.Errorf("Delete with a failing announcement = %v, want success (the TTL bounds the staleness)", err)
	}
	if _, err := b.svc.Resolve(ctx, l2.Code, "c"); !errors.Is(err, shorten.ErrNotFound) {
		t.Errorf("Resolve after Delete = %v, want ErrNotFound", err)
	}

	// Forget: what another node's announcement does here. The link is
	// still in the store, so the lookup after Forget reaches it.
	l3 := b.create(t, shorten.CreateRequest{URL: "https://example.com/c", Owner: owner.ID})
	for range 2 {
		if _, err := b.svc.Resolve(ctx, l3.Code, "c"); err != nil {
			t.Fatal(err)
		}
	}
	before := b.store.lookups.Load()
	b.svc.Forget(l3.Code)
	b.svc.Forget("unknown")
	if _, err := b.svc.Resolve(ctx, l3.Code, "c"); err != nil {
		t.Fatal(err)
	}
	if n := b.store.lookups.Load() - before; n != 1 {
		t.Errorf("a resolve after Forget made %d store lookups, want 1 (the entry was dropped)", n)
	}
}

func TestClickBufferDropsWhenFull(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *shorten.Options) { o.ClickBuffer = 2 })
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com"})
	var kept int
	for range 5 {
		if b.svc.RecordHit(shorten.Hit{LinkID: l.ID, UserAgent: browser}) {
			kept++
		}
	}
	if kept != 2 {
		t.Errorf("a buffer of 2 kept %d hits, want 2", kept)
	}
	if err := b.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _ := b.svc.Get(t.Context(), shorten.Caller{Admin: true}, l.Code)
	if got.Clicks != 2 {
		t.Errorf("clicks = %d, want 2", got.Clicks)
	}
}

func TestListPages(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := t.Context()
	var codes []string
	for i := range 5 {
		codes = append(codes, b.create(t, shorten.CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i), Owner: "key_a"}).Code)
	}
	b.create(t, shorten.CreateRequest{URL: "https://example.com/other", Owner: "key_b"})
	var got []string
	cursor := ""
	for range 10 {
		page, next, err := b.svc.List(ctx, shorten.Caller{ID: "key_a"}, nil, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page {
			got = append(got, l.Code)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	want := []string{codes[4], codes[3], codes[2], codes[1], codes[0]}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pages = %v, want %v (newest first, only key_a's)", got, want)
	}
	if _, _, err := b.svc.List(ctx, shorten.Caller{ID: "key_a"}, nil, "!!", 2); !apperr.Is(err, apperr.Invalid) {
		t.Errorf("List with a bad cursor = %v, want Invalid", err)
	}
}

func TestConcurrentCreatesAreGroupCommitted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const n = 300
	codes := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			l, err := b.svc.Create(context.Background(), shorten.CreateRequest{URL: fmt.Sprintf("https://example.com/%d", i)})
			if err != nil {
				t.Errorf("Create: %v", err)
			}
			codes[i] = l.Code
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, c := range codes {
		if seen[c] {
			t.Fatalf("code %q given twice", c)
		}
		seen[c] = true
	}
}

func TestNotificationLinks(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := t.Context()
	body := "Your order shipped: https://shop.example/track/42. Rate us: https://shop.example/rate?o=42 or https://shop.example/track/42"
	out := shorten.RewriteLinks(body, b.svc.NotificationShortener(ctx, "ntf_1"))
	again := shorten.RewriteLinks(body, b.svc.NotificationShortener(ctx, "ntf_1"))
	if out != again {
		t.Errorf("rendering twice gave %q then %q, want the same links", out, again)
	}
	if strings.Contains(out, "shop.example") || strings.Count(out, "https://sho.rt/") != 3 {
		t.Fatalf("RewriteLinks = %q, want every link shortened", out)
	}
	links, err := b.svc.NotificationLinks(ctx, "ntf_1")
	if err != nil || len(links) != 2 {
		t.Fatalf("NotificationLinks = %d links, %v; want 2 (one per distinct URL)", len(links), err)
	}
	other, _ := b.svc.ShortenForNotification(ctx, "ntf_2", "https://shop.example/track/42")
	if other.Code == links[0].Code {
		t.Error("two notifications share a link")
	}
	tg, err := b.svc.Resolve(ctx, links[0].Code, "c")
	if err != nil {
		t.Fatal(err)
	}
	b.svc.RecordHit(shorten.Hit{LinkID: tg.LinkID, UserAgent: browser})
	if err := b.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	links, _ = b.svc.NotificationLinks(ctx, "ntf_1")
	if links[0].Clicks != 1 || links[0].URL != "https://shop.example/track/42" {
		t.Errorf("notification link after a click = %+v, want 1 click on the tracking link", links[0])
	}
	kept := shorten.RewriteLinks("go http://127.0.0.1/x now", b.svc.NotificationShortener(ctx, "ntf_3"))
	if kept != "go http://127.0.0.1/x now" {
		t.Errorf("an unshortenable link became %q, want the long link kept", kept)
	}
	if _, err := b.svc.ShortenForNotification(ctx, "", "https://x.io"); !apperr.Is(err, apperr.Invalid) {
		t.Errorf("no notification id = %v, want Invalid", err)
	}
}

func TestRunFlushesOnStop(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *shorten.Options) { o.FlushInterval = time.Hour })
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.svc.Run(ctx) }()
	b.svc.RecordHit(shorten.Hit{LinkID: l.ID, UserAgent: browser})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	got, _ := b.svc.Get(t.Context(), shorten.Caller{Admin: true}, l.Code)
	if got.Clicks != 1 {
		t.Errorf("clicks after Run stopped = %d, want 1 (flushed on stop)", got.Clicks)
	}
}

// TestStaleIfError: past links.cache_ttl a cached link is read again, but
// while the store fails it still redirects, up to links.stale_ttl; when
// the store answers, the fresh answer wins.
func TestStaleIfError(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *shorten.Options) { o.CacheTTL, o.StaleTTL = 30*time.Second, time.Hour })
	ctx := t.Context()
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com/stale"})
	if _, err := b.svc.Resolve(ctx, l.Code, "c"); err != nil {
		t.Fatal(err)
	}
	b.store.down.Store(true)
	b.clock.Advance(time.Minute)
	before := b.store.lookups.Load()
	if got, err := b.svc.Resolve(ctx, l.Code, "c"); err != nil || got.URL != "https://example.com/stale" {
		t.Fatalf("Resolve while the store fails = %+v, %v; want the stale entry", got, err)
	}
	if b.store.lookups.Load() == before {
		t.Error("a stale entry answered without asking the store first")
	}
	if _, err := b.svc.Resolve(ctx, l.Code, "c"); err != nil {
		t.Errorf("second Resolve while the store fails = %v", err)
	}
	b.clock.Advance(2 * time.Hour) // past the stale TTL
	if _, err := b.svc.Resolve(ctx, l.Code, "c"); err == nil || errors.Is(err, shorten.ErrNotFound) {
		t.Errorf("Resolve past the stale TTL while the store fails = %v, want the store's error", err)
	}

	// Without a stale TTL, past the cache TTL the store's error is the answer.
	nb := setup(t, func(o *shorten.Options) { o.CacheTTL = 30 * time.Second })
	nl := nb.create(t, shorten.CreateRequest{URL: "https://example.com/nostale"})
	if _, err := nb.svc.Resolve(ctx, nl.Code, "c"); err != nil {
		t.Fatal(err)
	}
	nb.store.down.Store(true)
	nb.clock.Advance(time.Minute)
	if _, err := nb.svc.Resolve(ctx, nl.Code, "c"); err == nil {
		t.Error("Resolve with StaleTTL 0 past the cache TTL while the store fails succeeded")
	}
}

// TestRedirectRidesOutAStoreRestart: a redirect whose link no cache holds,
// while the store fails as a restarting PostgreSQL does (transiently),
// asks again for a moment and answers once the store is back, rather than
// failing at once (a 503 through the HTTP API).
func TestRedirectRidesOutAStoreRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *shorten.Options) { o.CacheTTL = 30 * time.Second })
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com/restart"})
	b.clock.Advance(time.Minute) // past the cache TTL, no stale TTL: nothing to answer from
	b.store.flaky.Store(3)
	before := b.store.lookups.Load()
	got, err := b.svc.Resolve(t.Context(), l.Code, "c")
	if err != nil || got.URL != "https://example.com/restart" {
		t.Fatalf("Resolve while the store restarts = %+v, %v; want the link once the store answers", got, err)
	}
	if n := b.store.lookups.Load() - before; n != 4 {
		t.Errorf("store asked %d times, want 4 (3 failures, then the answer)", n)
	}
}

// blackHoleCache is a shared cache whose engine never answers (Redis
// black-holed): every call blocks until its context ends.
type blackHoleCache struct{ calls atomic.Int32 }

func (c *blackHoleCache) Get(ctx context.Context, _ string) (shorten.CachedLink, bool, error) {
	c.calls.Add(1)
	<-ctx.Done()
	return shorten.CachedLink{}, false, ctx.Err()
}

func (c *blackHoleCache) Set(ctx context.Context, _ string, _ shorten.CachedLink, _ time.Duration) error {
	c.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

func (c *blackHoleCache) Delete(ctx context.Context, _ string) error {
	c.calls.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// TestBlackHoledSharedCache: creates, redirects and deletes go on from
// the store when the shared cache stops answering, each call to it cut
// off at its short deadline.
func TestBlackHoledSharedCache(t *testing.T) {
	t.Parallel()
	hole := &blackHoleCache{}
	b := setup(t, func(o *shorten.Options) { o.Shared = hole; o.SharedTimeout = 20 * time.Millisecond })
	within := func(what string, f func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still waiting on the black-holed shared cache after 10s", what)
		}
	}
	ctx := context.Background() // no deadline of its own, as an HTTP request's
	var l shorten.Link
	within("Create", func() (err error) {
		l, err = b.svc.Create(ctx, shorten.CreateRequest{URL: "https://example.com/x", Owner: "key_a"})
		return err
	})
	b.svc.Forget(l.Code)
	within("Resolve", func() error {
		tg, err := b.svc.Resolve(ctx, l.Code, "198.51.100.7")
		if err == nil && tg.URL != "https://example.com/x" {
			t.Errorf("Resolve = %+v, want the link from the store", tg)
		}
		return err
	})
	within("Delete", func() error { return b.svc.Delete(ctx, shorten.Caller{ID: "key_a"}, l.Code) })
	if n := hole.calls.Load(); n < 3 {
		t.Errorf("the shared cache was asked %d times, want at least 3", n)
	}
}
