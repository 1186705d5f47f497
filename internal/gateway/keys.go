package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

// KeyStore is what the gateway needs from the API key store
// (*store.DB).
type KeyStore = auth.KeyStore

// client is who a request comes from, as the gateway limits it.
type client struct {
	id httplimit.Identity
	// known: the API key is named in gateway.tiers or active in the key
	// store; only then does it select a tier and get its own counters.
	known bool
	tier  string
	// unsure: the key store could not be asked, so a key that may be
	// valid was taken as unknown.
	unsure bool
}

// key is the counter key of c's own limits: its API key when known, else
// its IP (so made-up keys share their IP's counters).
func (c client) key() string {
	if c.known {
		return c.id.Key()
	}
	return httplimit.IPKey(c.id.IP)
}

type clientCtxKey struct{}

// clientOf returns the client ServeHTTP resolved for r.
func clientOf(r *http.Request) client {
	c, _ := r.Context().Value(clientCtxKey{}).(client)
	return c
}

// resolve identifies r's client and its tier.
func (g *Gateway) resolve(r *http.Request) client {
	c := client{id: g.id.Identify(r), tier: g.cfg.AnonymousPolicy}
	if c.id.APIKey == "" {
		return c
	}
	if tier, ok := g.cfg.Tiers[c.id.APIKey]; ok {
		c.known, c.tier = true, tier
		return c
	}
	if g.keys == nil || !auth.Plausible(c.id.APIKey) {
		return c
	}
	ans, err := g.keys.cache.Lookup(r.Context(), auth.SumSecret(c.id.APIKey))
	if err == nil {
		err = ans.Stale
	}
	if err != nil {
		c.unsure = true
		g.keys.warn(g.log, err)
	}
	if ans.Found && ans.Key.Active() {
		c.known, c.tier = true, g.cfg.DefaultTier
	}
	return c
}

// keyCache holds the cache of verified keys, as the HTTP API's and the
// Envoy service's (auth.Cache): a known key is asked of the store at most
// once per 3 seconds (so a revoked key is noticed within it) and served
// from a stale answer for 15 minutes while the store fails; a lookup
// waits at most 250ms. It is safe for concurrent use.
type keyCache struct {
	cache *auth.Cache
	now   func() time.Time

	mu       sync.Mutex
	warnedAt time.Time
}

func newKeyCache(s KeyStore) *keyCache {
	return &keyCache{cache: auth.NewCache(s, auth.CacheOptions{}), now: time.Now}
}

// warn logs a failed key lookup, at most once a minute.
func (k *keyCache) warn(log *slog.Logger, err error) {
	now := k.now()
	k.mu.Lock()
	quiet := now.Sub(k.warnedAt) < time.Minute
	if !quiet {
		k.warnedAt = now
	}
	k.mu.Unlock()
	if !quiet {
		log.Warn("gateway could not check an API key; keys not cached are limited as their client IP", slog.Any("error", err))
	}
}

// requireKey serves next only for known clients on routes with
// require_key; others get 401 (503 while the key store fails).
func (g *Gateway) requireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := g.route(r)
		c := clientOf(r)
		switch {
		case !ok || !rt.RequireKey || c.known:
			next.ServeHTTP(w, r)
		case c.unsure:
			w.Header().Set("Retry-After", "1")
			writeProblem(w, r, http.StatusServiceUnavailable, "unavailable", "the API key could not be checked; retry shortly")
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-gateway"`)
			writeProblem(w, r, http.StatusUnauthorized, "unauthorized",
				"this route requires a valid API key: send Authorization: Bearer <key> or X-API-Key")
		}
	})
}

// writeProblem writes an RFC 9457 problem+json body.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, kind, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": httplimit.DefaultProblemBase + kind,
		"title": http.StatusText(status), "status": status, "detail": detail, "instance": r.URL.Path})
}
