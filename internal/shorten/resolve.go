package shorten

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/panics"
)

// Target is where a redirect goes.
type Target struct {
	LinkID int64
	URL    string
	// Expired is set when the link has expired; URL is then the fallback
	// URL, or empty when there is none (answer 410).
	Expired bool
	// Limited is set for a visit-limited link: Service.Redirect spends a
	// visit with Service.Visit before redirecting a human. UsedUp is set, with
	// Expired, when its visits are spent. Fallback is the link's fallback
	// URL (else the server's). ClickIDs asks for a click id on the target.
	Limited, UsedUp, ClickIDs bool
	Fallback                  string
	// Rules are the link's redirect rules, nil for none; Service.Choose
	// applies them to a visit.
	Rules *RuleSet
	// Unknown is set for an unknown code on a custom domain with a
	// fallback URL: redirect to URL and record nothing.
	Unknown bool
	// Domain is the custom domain the link was resolved on (ResolveHost);
	// "" for none.
	Domain string
	// Rule is the label of the rule that picked URL (set by Choose): its
	// name or "rules[i]", with "/arm" for a split, DefaultTarget when none
	// matched, "" for a link without rules.
	Rule string
}

// Errors of the redirect path, shared so that answering costs no
// allocation. Callers test them with errors.Is; ErrNotFound is also an
// apperr NotFound. ErrLimited comes wrapped in a *LimitedError.
var (
	ErrNotFound = apperr.New(apperr.NotFound, "no such short link")
	ErrLimited  = errors.New("too many lookups of unknown short links from this client")
)

// LimitedError is ErrLimited with how long the client should wait.
type LimitedError struct{ RetryAfter time.Duration }

func (e *LimitedError) Error() string { return ErrLimited.Error() }
func (e *LimitedError) Unwrap() error { return ErrLimited }

// Resolve finds where code redirects to, for a client at address client
// (the rate limit key for unknown codes). It answers from the in-process
// cache when it can, then the shared cache, then the store, with one store
// lookup per code in flight. It returns ErrNotFound for unknown codes and
// a *LimitedError when client has looked up too many unknown codes. code
// names a link without a domain (ResolveHost resolves by host), or is a
// Key.
func (s *Service) Resolve(ctx context.Context, code, client string) (Target, error) {
	domain, _ := SplitKey(code)
	return s.resolveKey(ctx, code, domain, client)
}

// resolveKey is Resolve for the link with key on domain, whose unknown
// codes are limited apart from other domains'.
func (s *Service) resolveKey(ctx context.Context, key, domain, client string) (Target, error) {
	now := s.now().UnixMicro()
	if e := s.links.get(key, now); e != nil {
		s.metrics.LocalHit()
		return s.target(e, now), nil
	}
	s.metrics.LocalMiss()
	if _, code := SplitKey(key); !validCode(code) || s.unknown.get(key, now) != nil {
		return Target{}, s.unknownCode(ctx, domain, client, now)
	}
	if until := s.limited.until(limitKey(domain, client)); now < until {
		s.metrics.Limited()
		return Target{}, &LimitedError{RetryAfter: time.Duration(until-now) * time.Microsecond}
	}
	v, err, _ := s.flight.Do(key, func() (any, error) { return s.load(ctx, key) })
	if err != nil {
		if apperr.IsTransient(err) {
			// The store could not tell whether the code exists: the
			// lookup counts as an unknown code's, or a store outage
			// would lift the limit on enumerating codes.
			return Target{}, s.chargeUnknown(ctx, domain, client, now, err)
		}
		return Target{}, err
	}
	e := v.(*entry)
	if e.notFound {
		return Target{}, s.unknownCode(ctx, domain, client, now)
	}
	return s.target(e, now), nil
}

// limitKey is the unknown-code limiter's key of client on domain: the
// client alone on hosts that are no domain, as before domains.
func limitKey(domain, client string) string {
	if domain == "" {
		return client
	}
	return domain + "/" + client
}

func (s *Service) target(e *entry, now int64) Target {
	if e.extra != nil {
		return s.specialTarget(e, now)
	}
	if e.expired(now) {
		s.metrics.Expired()
		return Target{LinkID: e.id, URL: s.opts.FallbackURL, Expired: true}
	}
	s.metrics.Found()
	return Target{LinkID: e.id, URL: e.url, Rules: e.rules}
}

// redirectRetry is how long a redirect whose link no cache holds asks a
// store that fails transiently again before it answers 503: a PostgreSQL
// restart takes about 2 s.
const redirectRetry = 3 * time.Second

// staleRetry is how long a stale entry answered because the store failed
// is trusted again before the store is asked anew.
const staleRetry = time.Second

// load reads the link with key code (see Key) from the shared cache or
// the store and caches the answer. When the store fails, an entry past its
// CacheTTL but within its StaleTTL (this node's, else the shared cache's)
// answers instead.
func (s *Service) load(ctx context.Context, code string) (*entry, error) {
	now := s.now()
	var stale *CachedLink
	if sh := s.opts.Shared; sh != nil {
		sctx, cancel := context.WithTimeout(ctx, s.opts.SharedTimeout)
		cl, ok, err := sh.Get(sctx, code)
		cancel()
		switch {
		case err != nil:
			s.metrics.SharedError()
			s.log.Debug("shared link cache get failed", slog.String("code", code), slog.Any("error", err))
		case ok && (cl.FreshUntil.IsZero() || now.Before(cl.FreshUntil)):
			s.metrics.SharedHit()
			return s.cacheLink(code, cl.ID, cl.URL, cl.ExpiresAt, s.sharedRules(code, cl), now), nil
		case ok:
			stale = &cl
			s.metrics.SharedMiss()
		default:
			s.metrics.SharedMiss()
		}
	}
	domain, bare := SplitKey(code)
	var l Link
	lookup := func() error {
		var err error
		l, err = s.store.LinkByCode(ctx, domain, bare)
		return err
	}
	// While the store is known down, the breaker answers without it
	// (a *breaker.OpenError), one probe at a time excepted.
	err := s.storeGate.Call(lookup)
	if err != nil && apperr.IsTransient(err) {
		if e, serr := s.staleEntry(code, stale, now, err); serr == nil {
			return e, nil
		}
		// Nothing cached to answer from: ride out a short outage (a
		// PostgreSQL restart) for redirectRetry rather than answer 503.
		// One lookup of the node retries; the others wait for it
		// without reaching the store, and once a whole window failed
		// they answer 503 at once until a probe finds the store back.
		err = s.storeGate.Ride(ctx, time.Now().Add(redirectRetry), lookup)
	}
	if apperr.Is(err, apperr.NotFound) {
		e := &entry{notFound: true, until: now.Add(s.opts.NegativeTTL).UnixMicro()}
		s.unknown.put(code, e)
		return e, nil
	}
	if err != nil {
		return s.staleEntry(code, stale, now, err)
	}
	if l.special() {
		return s.cacheSpecial(code, l, now), nil // never shared: see share
	}
	e := s.cacheLink(code, l.ID, l.URL, l.ExpiresAt, compileRules(l.ID, l.Rules), now)
	s.share(ctx, l, now)
	return e, nil
}

// cacheLink caches a link read from the shared cache or the store, trusted
// for CacheTTL and kept for StaleTTL more.
func (s *Service) cacheLink(code string, id int64, url string, expiresAt time.Time, rules *RuleSet, now time.Time) *entry {
	until := now.Add(s.opts.CacheTTL)
	e := &entry{id: id, url: url, expiresAt: micros(expiresAt), rules: rules, until: until.UnixMicro(), keep: until.Add(s.opts.StaleTTL).UnixMicro()}
	s.links.put(code, e)
	return e
}

// staleEntry answers a lookup whose store read failed with err: this
// node's stale entry for code, else the shared cache's (stale, if not
// nil), trusted for staleRetry so the store is asked again soon; else err.
func (s *Service) staleEntry(code string, stale *CachedLink, now time.Time, err error) (*entry, error) {
	e := s.links.stale(code, now.UnixMicro())
	if e == nil && stale != nil {
		e = &entry{id: stale.ID, url: stale.URL, expiresAt: micros(stale.ExpiresAt), rules: s.sharedRules(code, *stale)}
	}
	if e == nil {
		return nil, err
	}
	s.metrics.StaleHit()
	s.log.Debug("link store failed: answering from a stale cache entry", slog.String("code", code), slog.Any("error", err))
	retry := &entry{id: e.id, url: e.url, expiresAt: e.expiresAt, rules: e.rules, until: now.Add(staleRetry).UnixMicro(), keep: max(e.keep, e.until), extra: e.extra}
	s.links.put(code, retry)
	return retry, nil
}

// share puts l in the shared cache, fresh for links.cache_ttl and kept for
// links.stale_ttl more (never past its expiry). Creating a link shares it
// too, so every node can redirect it from Redis even while the database is
// down, before its first visit.
func (s *Service) share(ctx context.Context, l Link, now time.Time) {
	sh := s.opts.Shared
	if sh == nil || l.Expired(now) || l.special() {
		return // a special link's extras are read from the store by each node
	}
	ttl := s.opts.CacheTTL + s.opts.StaleTTL
	if !l.ExpiresAt.IsZero() {
		ttl = min(ttl, l.ExpiresAt.Sub(now)) // the shared entry never outlives the link
	}
	cl := CachedLink{ID: l.ID, URL: l.URL, ExpiresAt: l.ExpiresAt, FreshUntil: now.Add(s.opts.CacheTTL), Rules: EncodeRules(l.Rules)}
	sctx, cancel := context.WithTimeout(ctx, s.opts.SharedTimeout)
	defer cancel()
	if err := sh.Set(sctx, Key(l.Domain, l.Code), cl, ttl); err != nil {
		s.metrics.SharedError()
		s.log.Debug("shared link cache set failed", slog.String("code", Key(l.Domain, l.Code)), slog.Any("error", err))
	}
}

// unknownCode charges client for a lookup of an unknown code on domain
// ("" for none): each domain has its own limit per client.
func (s *Service) unknownCode(ctx context.Context, domain, client string, now int64) error {
	err := s.chargeUnknown(ctx, domain, client, now, ErrNotFound)
	if err == ErrNotFound {
		s.metrics.NotFound()
	}
	return err
}

// chargeUnknown charges client's unknown-code limit on domain for a
// lookup answered with answer (ErrNotFound, or the store's failure) and
// returns answer, or a *LimitedError when client is over the limit.
func (s *Service) chargeUnknown(ctx context.Context, domain, client string, now int64, answer error) error {
	if s.opts.Limiter == nil {
		return answer
	}
	d, err := s.opts.Limiter.Allow(ctx, "links_unknown:"+limitKey(domain, client), 1)
	if err != nil { // fail open: a limiter outage must not break redirects
		s.log.Debug("unknown-code limiter failed", slog.Any("error", err))
		return answer
	}
	if !d.Allowed {
		s.limited.set(limitKey(domain, client), now+d.RetryAfter.Microseconds())
		s.metrics.Limited()
		return &LimitedError{RetryAfter: d.RetryAfter}
	}
	return answer
}

// RecordHit queues a hit on a live link for the next flush. It never
// blocks and never touches the store; when the buffer is full the hit is
// dropped and counted in sluice_links_clicks_dropped_total.
func (s *Service) RecordHit(h Hit) bool {
	return s.clicks.add(h, s.now().UnixMicro())
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// limitedClientsMax bounds the clients remembered as over their limit.
const limitedClientsMax = 10_000

// limitedClients remembers clients over their unknown-code limit until
// their RetryAfter, so their lookups of uncached codes are refused without
// reaching the store.
type limitedClients struct {
	mu sync.Mutex
	m  map[string]int64 // client -> Unix microseconds
}

func (l *limitedClients) until(client string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[client]
}

func (l *limitedClients) set(client string, until int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) >= limitedClientsMax {
		clear(l.m) // bounded and crude: the limiter itself still refuses them
	}
	l.m[client] = until
}

// Run flushes recorded hits every FlushInterval (sooner when the buffer
// fills) and purges expired links (and, with ClickRetention, old clicks)
// every PurgeInterval, until ctx ends; it
// then flushes once more, within a few seconds, and returns. Call it once,
// and stop it before closing the store.
func (s *Service) Run(ctx context.Context) error {
	flush := time.NewTicker(s.opts.FlushInterval)
	defer flush.Stop()
	purge := time.NewTicker(s.opts.PurgeInterval)
	defer purge.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := s.flush(fctx); err != nil {
				s.log.Error("last flush of link clicks failed; clicks lost", slog.Any("error", err))
			}
			return nil
		case <-flush.C:
			_ = s.flush(ctx) // logged by Flush
		case <-s.clicks.kick:
			_ = s.flush(ctx)
		case <-purge.C:
			if _, err := s.Purge(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("purging expired links failed", slog.Any("error", err))
			}
			if _, err := s.PurgeClicks(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("purging old link clicks failed", slog.Any("error", err))
			}
		}
	}
}

// flush is Flush with a panic recovered and reported (Options.Panics):
// the batch being flushed is lost, the flusher goes on.
func (s *Service) flush(ctx context.Context) error {
	return s.opts.Panics.Do(ctx, panics.Clicks, func() error { return s.Flush(ctx) })
}

// purgeBatch bounds the links one purge transaction deletes.
const purgeBatch = 1000

// Purge deletes links that expired more than ExpiredRetention ago and
// returns how many went. Cached entries need no purge: each carries its
// link's expiry, checked on every hit.
func (s *Service) Purge(ctx context.Context) (int, error) {
	before := s.now().Add(-s.opts.ExpiredRetention)
	total := 0
	for {
		n, err := s.store.PurgeExpiredLinks(ctx, before, purgeBatch)
		total += n
		s.metrics.Purged(n)
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
}
