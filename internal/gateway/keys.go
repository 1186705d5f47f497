package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

// KeyStore is what the gateway needs from the API key store
// (*store.DB).
type KeyStore interface {
	APIKeyByHash(ctx context.Context, hash string) (auth.Key, error)
}

// The key cache: a known key is asked of the store at most once per
// keyCacheTTL (so a revoked key is noticed within it) and served from a
// stale answer for keyStaleIfError while the store fails; unknown keys
// (only well-formed ones reach the store) are remembered in a smaller
// map. Both maps are cleared when full: bounded memory, whatever the
// clients send. A lookup waits at most keyLookupTimeout.
const (
	keyCacheTTL      = 3 * time.Second
	keyStaleIfError  = 15 * time.Minute
	knownKeysMax     = 10_000
	unknownKeysMax   = 1_000
	keyLookupTimeout = 250 * time.Millisecond
)

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
	known, err := g.keys.active(r.Context(), auth.HashSecret(c.id.APIKey))
	if err != nil {
		c.unsure = true
		g.keys.warn(g.log, err)
	}
	if known {
		c.known, c.tier = true, g.cfg.DefaultTier
	}
	return c
}

// keyCache answers "is this key active in the store" through bounded
// maps. It is safe for concurrent use.
type keyCache struct {
	store KeyStore
	now   func() time.Time

	mu       sync.Mutex
	known    map[string]time.Time // hash -> when the store said active
	unknown  map[string]time.Time // hash -> when the store said no
	warnedAt time.Time
}

func newKeyCache(s KeyStore) *keyCache {
	return &keyCache{store: s, now: time.Now, known: map[string]time.Time{}, unknown: map[string]time.Time{}}
}

// active reports whether the key hashed to hash is active. On a store
// error it answers from a stale entry when there is one (true, err).
func (k *keyCache) active(ctx context.Context, hash string) (bool, error) {
	now := k.now()
	k.mu.Lock()
	at, isKnown := k.known[hash]
	if isKnown && now.Sub(at) < keyCacheTTL {
		k.mu.Unlock()
		return true, nil
	}
	if at, ok := k.unknown[hash]; ok && now.Sub(at) < keyCacheTTL {
		k.mu.Unlock()
		return false, nil
	}
	k.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, keyLookupTimeout)
	defer cancel()
	key, err := k.store.APIKeyByHash(ctx, hash)
	if err != nil && !apperr.Is(err, apperr.NotFound) {
		return isKnown && now.Sub(at) < keyStaleIfError, err
	}
	active := err == nil && key.Active()
	k.mu.Lock()
	defer k.mu.Unlock()
	m, limit := k.unknown, unknownKeysMax
	if active {
		m, limit = k.known, knownKeysMax
	} else {
		delete(k.known, hash)
	}
	if len(m) >= limit {
		clear(m) // crude but bounded; a full map means many distinct keys, or an attack
	}
	m[hash] = now
	return active, nil
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
