package shorten

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/breaker"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/ratelimit"
)

// SharedCache is a cache shared by every node (Redis), the second level
// behind each node's own. Errors make the redirect path fall through to the
// store, never fail.
type SharedCache interface {
	Get(ctx context.Context, code string) (CachedLink, bool, error)
	Set(ctx context.Context, code string, l CachedLink, ttl time.Duration) error
	Delete(ctx context.Context, code string) error
}

// CachedLink is what the shared cache keeps of a link.
type CachedLink struct {
	ID        int64
	URL       string
	ExpiresAt time.Time // zero: never
	// FreshUntil is when the entry stops being trusted without asking the
	// store; past it, it answers only while the store fails (StaleTTL).
	// Zero: fresh for as long as the shared cache keeps it.
	FreshUntil time.Time
	// Rules are the link's rules as EncodeRules writes them; "" for none.
	Rules string
}

// Limiter limits unknown-code lookups per client; a ratelimit.PolicyLimiter
// is one.
type Limiter interface {
	Allow(ctx context.Context, key string, cost int64) (ratelimit.Decision, error)
}

// Options configure a Service. Store, Codec and BaseURL are required.
type Options struct {
	Store Store
	Codec *Codec
	// BaseURL prefixes codes in short URLs: BaseURL + "/" + code.
	BaseURL string
	// Targets says which targets are acceptable.
	Targets TargetPolicy
	// FallbackURL, when set, is where expired links redirect instead of
	// answering 410.
	FallbackURL string
	// Shared is the second-level cache. If nil, there is none.
	Shared SharedCache
	// SharedTimeout bounds each call to Shared (a Redis that stops
	// answering costs a redirect this long, then the store answers). If
	// zero, DefaultSharedTimeout.
	SharedTimeout time.Duration
	// Geo locates clients for country and city rules. If nil, such
	// rules are refused when written.
	Geo Geo
	// Limiter limits unknown-code lookups per client address. If nil,
	// they are not limited.
	Limiter Limiter
	// CacheSize bounds the links cached in process (default 100,000), and
	// NegativeCacheSize the unknown codes remembered (default 10,000).
	CacheSize, NegativeCacheSize int
	// CacheTTL bounds how long a cached link is trusted before it is read
	// again, and so how long a delete made on another node can take to be
	// seen here when its announcement (Announce) is lost (default 30s).
	// NegativeTTL is the same for unknown codes (default 5s).
	CacheTTL, NegativeTTL time.Duration
	// StaleTTL is how long past CacheTTL a link stays cached (here and in
	// the shared cache) to answer its redirects while the store fails (a
	// database restart): stale-if-error. A link's URL does not change
	// once created, so a stale entry is wrong only for a link deleted, or
	// whose rules changed (SetRules), while the change could not reach
	// the caches. If zero, entries are not kept past CacheTTL.
	StaleTTL time.Duration
	// Announce tells every node, this one included, that the link with
	// code was deleted, so that each calls Forget rather than redirect it
	// until CacheTTL runs out. Delete calls it once the link is gone from
	// the store and the shared cache; SetRules calls it for a link never
	// announced whole (with visit limits, a fallback or click ids) once its
	// new rules are stored. It must not block; a failure is
	// logged, never returned, since the TTL still bounds the staleness. If
	// nil, other nodes see a delete only when their entry's CacheTTL ends.
	Announce func(code string) error
	// OnClicks, if set, is called with every batch of clicks once it is
	// recorded, bots' included (Click.Bot), from the flusher: status
	// events (internal/events) report the human ones. If nil, nothing is.
	OnClicks func(ctx context.Context, clicks []Click)
	// OnRecorded, if set, is called with every batch of hits once it is
	// recorded, bots' included, from the flusher: the live stats streams
	// (internal/linklive) publish them. It must not block; it may keep
	// the slice, which the service never changes after the call. If nil,
	// nothing is.
	OnRecorded func(clicks []Click)
	// AnnounceCreated tells every node, this one included, of a link just
	// created, so that each caches it (Learn) and can redirect it even
	// while the store and the shared cache both fail. Like Announce it
	// must not block, and a failure is logged, never returned. If nil,
	// other nodes learn a link from the shared cache or the store. It is
	// also called with a link's new form when its rules change
	// (SetRules), so that each node replaces its cached entry.
	AnnounceCreated func(code string, l CachedLink) error
	// AnnounceDomains tells every node, this one included, that a custom
	// domain was added or removed, so that each calls ForgetDomains. Like
	// Announce it must not block. If nil, other nodes see the change
	// when their domain list is next read (CacheTTL).
	AnnounceDomains func() error
	// ClickBuffer bounds the hits held between flushes (default 100,000);
	// FlushInterval is the time between flushes (default 1s).
	ClickBuffer   int
	FlushInterval time.Duration
	// PurgeInterval is the time between purges of expired links (default
	// 1h); ExpiredRetention is how long an expired link is kept (answering
	// 410) before it is purged (default 24h).
	PurgeInterval, ExpiredRetention time.Duration
	// ClickRetention is how long raw clicks are kept: the purge job (every
	// PurgeInterval) deletes older ones when the store implements
	// ClickRetentionStore. Rollups and conversions are kept, so stats of
	// old periods still answer. Zero (the default) keeps clicks forever.
	ClickRetention time.Duration
	// Metrics is told what the service observes (see Metrics). If nil,
	// nothing is recorded.
	Metrics *Metrics
	// Logger receives warnings. If nil, nothing is logged.
	Logger *slog.Logger
	// Panics reports a panic of the click flusher (the "clicks" surface):
	// the batch it was flushing is lost, the flusher goes on. If nil, it
	// is logged to slog.Default() and not counted.
	Panics *panics.Reporter
	// Now is the clock. If nil, time.Now is used.
	Now func() time.Time
	// Country returns the ISO 3166-1 alpha-2 country of a client address
	// (a geo database), called by the click flusher, off the redirect
	// path. If nil, clicks have no country.
	Country func(client string) string
	// Rand is the randomness of click ids. If nil, crypto/rand.
	Rand io.Reader
	// NotificationClickIDs gives the links made for notifications click
	// ids (LinkExtras.ClickIDs), for conversions credited to a message.
	NotificationClickIDs bool
	// Domains configures custom domains: the server's own hosts, DNS
	// verification and caps (see DomainOptions).
	Domains DomainOptions
}

// Service creates, resolves and reports on short links. It is safe for
// concurrent use. Run must be running for hits to be recorded and expired
// links purged.
type Service struct {
	opts       Options
	store      Store
	codec      *Codec
	now        func() time.Time
	log        *slog.Logger
	baseURL    string
	visitorKey []byte
	clickKey   []byte
	metrics    Metrics

	links   *cache
	unknown *cache
	flight  singleflight.Group
	limited limitedClients
	// storeGate keeps redirects of uncached links from reaching the
	// store one by one while it is down (resolve.go).
	storeGate breaker.Breaker
	spent     spentLinks
	clicks    *clickBuffer
	flushMu   sync.Mutex
	inserter  batcher
	dom       domains
}

// DefaultSharedTimeout is how long a request waits for the shared cache
// (Options.SharedTimeout) before going on to the store.
const DefaultSharedTimeout = 250 * time.Millisecond

// New returns a Service for opts.
func New(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Codec == nil {
		return nil, errors.New("shorten: Store and Codec are required")
	}
	if !strings.HasPrefix(opts.BaseURL, "http://") && !strings.HasPrefix(opts.BaseURL, "https://") {
		return nil, fmt.Errorf("shorten: base URL %q is not http(s)", opts.BaseURL)
	}
	opts.CacheSize = cmp.Or(opts.CacheSize, 100_000)
	opts.NegativeCacheSize = cmp.Or(opts.NegativeCacheSize, 10_000)
	opts.CacheTTL = cmp.Or(opts.CacheTTL, 30*time.Second)
	opts.NegativeTTL = cmp.Or(opts.NegativeTTL, 5*time.Second)
	opts.SharedTimeout = cmp.Or(opts.SharedTimeout, DefaultSharedTimeout)
	opts.ClickBuffer = cmp.Or(opts.ClickBuffer, 100_000)
	opts.FlushInterval = cmp.Or(opts.FlushInterval, time.Second)
	opts.PurgeInterval = cmp.Or(opts.PurgeInterval, time.Hour)
	opts.ExpiredRetention = cmp.Or(opts.ExpiredRetention, 24*time.Hour)
	opts.Domains = opts.Domains.withDefaults()
	s := &Service{
		opts:       opts,
		store:      opts.Store,
		codec:      opts.Codec,
		now:        opts.Now,
		log:        cmp.Or(opts.Logger, slog.New(slog.DiscardHandler)),
		baseURL:    strings.TrimRight(opts.BaseURL, "/"),
		visitorKey: opts.Codec.visitor[:],
		clickKey:   clickKey(opts.Codec.visitor[:]),
		links:      newCache(opts.CacheSize),
		unknown:    newCache(opts.NegativeCacheSize),
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.metrics = opts.Metrics.bound()
	s.clicks = newClickBuffer(opts.ClickBuffer, &s.metrics)
	if s.metrics.ClickBuffer != nil {
		s.metrics.ClickBuffer(s.clicks.len)
	}
	s.limited.m = make(map[string]int64)
	s.inserter.store = s.store
	s.inserter.codec = s.codec
	return s, nil
}

// ShortURL returns the public URL of code.
func (s *Service) ShortURL(code string) string { return s.baseURL + "/" + code }

// CreateRequest is a link to create.
type CreateRequest struct {
	URL  string
	Slug string // empty: a code from the sequence
	// Domain is a registered custom domain the caller may use; empty for
	// none.
	Domain string
	// ExpiresAt is the zero time for a link that never expires.
	ExpiresAt time.Time
	Owner     string
	// Admin says the owner may use every domain.
	Admin bool
	LinkExtras
}

// Create validates req and stores a new link. Invalid input is an apperr
// Unprocessable error naming the field ("url", "slug", "expires_at",
// "domain": a domain not registered, or another caller's); a taken slug
// is an apperr Conflict naming "slug".
func (s *Service) Create(ctx context.Context, req CreateRequest) (Link, error) {
	now := s.now()
	var fields []apperr.FieldError
	if req.Domain != "" {
		d, err := s.linkDomain(ctx, Caller{ID: req.Owner, Admin: req.Admin}, req.Domain)
		switch {
		case apperr.Is(err, apperr.Unprocessable):
			var ae *apperr.Error
			if errors.As(err, &ae) {
				fields = append(fields, ae.Fields...)
			}
		case err != nil:
			return Link{}, err
		default:
			req.Domain = d.Name
		}
	}
	if _, err := s.opts.Targets.ValidateTarget(req.URL); err != nil {
		fields = append(fields, apperr.FieldError{Field: "url", Detail: err.Error()})
	}
	if req.Slug != "" {
		if err := ValidateSlug(req.Slug); err != nil {
			fields = append(fields, apperr.FieldError{Field: "slug", Detail: err.Error()})
		}
	}
	if !req.ExpiresAt.IsZero() && !req.ExpiresAt.After(now) {
		fields = append(fields, apperr.FieldError{Field: "expires_at", Detail: "must be in the future"})
	}
	fields = append(fields, s.validateExtras(req.LinkExtras)...)
	if err := apperr.Fields(apperr.Unprocessable, "the link request is invalid", fields); err != nil {
		return Link{}, err
	}
	nl := NewLink{Domain: req.Domain, Code: req.Slug, URL: req.URL, Owner: req.Owner, CreatedAt: now, ExpiresAt: req.ExpiresAt, LinkExtras: req.LinkExtras}
	l, err := s.create(ctx, nl, func() (Link, bool, error) {
		if req.Domain != "" { // the domain may have been removed meanwhile
			if _, err := s.linkDomain(ctx, Caller{ID: req.Owner, Admin: req.Admin}, req.Domain); apperr.Is(err, apperr.Unprocessable) {
				return Link{}, false, errDomainGone
			} else if err != nil {
				return Link{}, false, err
			}
		}
		if req.Slug != "" {
			return Link{}, false, &apperr.Error{Code: apperr.Conflict, Message: "the slug is taken",
				Fields: []apperr.FieldError{{Field: "slug", Detail: fmt.Sprintf("%q is taken", req.Slug)}}}
		}
		return Link{}, false, nil
	})
	if err != nil {
		return Link{}, err
	}
	if req.Slug != "" {
		s.unknown.remove(Key(req.Domain, req.Slug)) // a 404 remembered for the slug must not hide the new link
	}
	return l, nil
}

// errDomainGone refuses a link whose domain was removed while it was
// being created.
var errDomainGone = &apperr.Error{Code: apperr.Unprocessable, Message: "the link request is invalid",
	Fields: []apperr.FieldError{{Field: "domain", Detail: "is not a domain registered by this caller"}}}

// maxCodeRetries bounds the fresh ids tried when generated codes are taken
// (by custom slugs that happen to look like codes).
const maxCodeRetries = 8

// create stores nl through the batcher. When it does not go in, onTaken
// decides: return the existing link, fail, or (false, nil) retry with a
// fresh id.
func (s *Service) create(ctx context.Context, nl NewLink, onTaken func() (Link, bool, error)) (Link, error) {
	for range maxCodeRetries {
		l, ok, err := s.inserter.insert(ctx, nl)
		if err != nil {
			return Link{}, fmt.Errorf("create link: %w", err)
		}
		if ok {
			s.metrics.Created()
			s.share(ctx, l, s.now())
			s.announceCreated(l)
			return l, nil
		}
		existing, found, err := onTaken()
		if err != nil || found {
			return existing, err
		}
	}
	return Link{}, fmt.Errorf("create link: %d generated codes in a row were taken", maxCodeRetries)
}

// ShortenForNotification returns the short link of url owned by
// notification id, creating it on first use: one link per notification per
// URL, so rendering a message again (a retry) reuses it. The SMS renderer
// calls it for each link of a message, through RewriteLinks, and sends the
// long link when it fails.
func (s *Service) ShortenForNotification(ctx context.Context, notificationID, url string) (Link, error) {
	if notificationID == "" {
		return Link{}, apperr.New(apperr.Invalid, "a notification id is required")
	}
	if _, err := s.opts.Targets.ValidateTarget(url); err != nil {
		return Link{}, &apperr.Error{Code: apperr.Unprocessable, Message: "the link is not shortened",
			Fields: []apperr.FieldError{{Field: "url", Detail: err.Error()}}}
	}
	if l, err := s.store.NotificationLink(ctx, notificationID, url); err == nil {
		return l, nil
	} else if !apperr.Is(err, apperr.NotFound) {
		return Link{}, err
	}
	nl := NewLink{URL: url, NotificationID: notificationID, CreatedAt: s.now(), LinkExtras: LinkExtras{ClickIDs: s.opts.NotificationClickIDs}}
	return s.create(ctx, nl, func() (Link, bool, error) {
		l, err := s.store.NotificationLink(ctx, notificationID, url)
		if apperr.Is(err, apperr.NotFound) {
			return Link{}, false, nil // the generated code was taken: next id
		}
		return l, err == nil, err
	})
}

// NotificationShortener returns the shorten function RewriteLinks needs
// for one notification's message: each URL becomes that notification's
// short URL for it.
func (s *Service) NotificationShortener(ctx context.Context, notificationID string) func(url string) (string, error) {
	return func(url string) (string, error) {
		l, err := s.ShortenForNotification(ctx, notificationID, url)
		if err != nil {
			return "", err
		}
		return s.ShortURL(l.Code), nil
	}
}

// NotificationLinks returns the links of a notification with their clicks,
// oldest first.
func (s *Service) NotificationLinks(ctx context.Context, notificationID string) ([]Link, error) {
	return s.store.NotificationLinks(ctx, notificationID)
}

// Caller is who asks: the API key id, and whether it may see every link.
type Caller struct {
	ID    string
	Admin bool
}

func (c Caller) owns(l Link) bool { return c.Admin || l.Owner == c.ID }

// Get returns the link with code (a Key: "domain/code" for a link on a
// custom domain), with its statistics as last flushed. A link the caller
// does not own is NotFound, as if absent.
func (s *Service) Get(ctx context.Context, caller Caller, code string) (Link, error) {
	domain, bare := SplitKey(code)
	l, err := s.store.LinkByCode(ctx, domain, bare)
	if err != nil {
		return Link{}, err
	}
	if !caller.owns(l) {
		return Link{}, apperr.New(apperr.NotFound, "link %q not found", code)
	}
	return l, nil
}

// Delete removes the link with code, which the caller must own, drops it
// from this node's cache and the shared one, and announces it. Other nodes
// stop redirecting it when the announcement reaches them, or within
// CacheTTL if it is lost.
func (s *Service) Delete(ctx context.Context, caller Caller, code string) error {
	if _, err := s.Get(ctx, caller, code); err != nil {
		return err
	}
	domain, bare := SplitKey(code)
	if err := s.store.DeleteLink(ctx, domain, bare); err != nil {
		return err
	}
	s.links.remove(code)
	if s.opts.Shared != nil {
		sctx, cancel := context.WithTimeout(ctx, s.opts.SharedTimeout)
		err := s.opts.Shared.Delete(sctx, code)
		cancel()
		if err != nil {
			s.log.Warn("dropping a deleted link from the shared cache failed", slog.String("code", code), slog.Any("error", err))
		}
	}
	// Announced last: a node that forgets the code on hearing this and
	// looks it up again must find it neither in the shared cache nor in
	// the store.
	s.announceChanged(code)
	return nil
}

// announceChanged tells every node to drop code from its cache (see
// Options.Announce): the link was deleted, or changed in a way the
// created-link announcement cannot carry.
func (s *Service) announceChanged(code string) {
	if s.opts.Announce == nil {
		return
	}
	if err := s.opts.Announce(code); err != nil {
		s.log.Warn("announcing a deleted or changed link failed; other nodes keep their cached entry until it expires",
			slog.String("code", code), slog.Duration("cache_ttl", s.opts.CacheTTL), slog.Any("error", err))
	}
}

// announceCreated tells the other nodes of l, if they are to be told.
func (s *Service) announceCreated(l Link) {
	if s.opts.AnnounceCreated == nil || l.Expired(s.now()) || l.special() {
		return
	}
	key := Key(l.Domain, l.Code)
	if err := s.opts.AnnounceCreated(key, CachedLink{ID: l.ID, URL: l.URL, ExpiresAt: l.ExpiresAt, Rules: EncodeRules(l.Rules)}); err != nil {
		s.log.Warn("announcing a created link failed; other nodes read it from the shared cache or the store",
			slog.String("code", key), slog.Any("error", err))
	}
}

// Learn caches a link created on another node (see
// Options.AnnounceCreated), as a read from the shared cache would, and
// forgets that code was unknown here. A node calls it on hearing of the
// link; it must not block.
func (s *Service) Learn(code string, l CachedLink) {
	if domain, bare := SplitKey(code); !validCode(bare) || strings.Contains(domain, "/") {
		return
	}
	s.unknown.remove(code)
	s.cacheLink(code, l.ID, l.URL, l.ExpiresAt, s.sharedRules(code, l), s.now())
}

// Forget drops code from this node's in-process cache, so that its next
// redirect reads the shared cache or the store again. A node calls it on
// hearing that the link was deleted (see Options.Announce); for a code
// not cached it does nothing. The negative cache is left alone: a code
// that was a link until the delete is not in it, and an entry remembered
// from before the link existed is right again now.
func (s *Service) Forget(code string) { s.links.remove(code) }

// List returns a page of the caller's links, newest first, and the cursor
// of the next page ("" after the last): only those on *domain when domain
// is not nil ("" for links without a domain).
func (s *Service) List(ctx context.Context, caller Caller, domain *string, cursor string, limit int) ([]Link, string, error) {
	before, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	if domain != nil && *domain != "" {
		norm, err := NormalizeDomain(*domain)
		if err != nil {
			return nil, "", &apperr.Error{Code: apperr.Invalid, Message: "the domain is not a host name",
				Fields: []apperr.FieldError{{Field: "domain", Detail: err.Error()}}}
		}
		domain = &norm
	}
	links, err := s.store.ListLinks(ctx, caller.ID, domain, before, limit+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(links) > limit {
		links = links[:limit]
		next = formatCursor(links[limit-1].ID)
	}
	return links, next, nil
}

func formatCursor(id int64) string {
	return base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, uint64(id)))
}

func parseCursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 8 {
		return 0, &apperr.Error{Code: apperr.Invalid, Message: "the cursor is not one this server gave",
			Fields: []apperr.FieldError{{Field: "cursor", Detail: "is not valid"}}}
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}
