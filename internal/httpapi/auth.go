package httpapi

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/edge"
)

// KeyStore is what the HTTP API needs from the record store for API keys.
type KeyStore interface {
	APIKeyByHash(ctx context.Context, hash string) (auth.Key, error)
	CountActiveAPIKeys(ctx context.Context) (int, error)
	// APIKeyEverCreated reports whether a key was ever created: keyless
	// mode ends with the first key, for good.
	APIKeyEverCreated(ctx context.Context) (bool, error)
	CreateAPIKey(ctx context.Context, k auth.Key) error
	ListAPIKeys(ctx context.Context) ([]auth.Key, error)
	RevokeAPIKey(ctx context.Context, id string) error
}

// authCacheTTL bounds how long a revoked key, or a key created by another
// process (`sluice keys create`), takes to be noticed.
// authStaleIfError is how long a cached answer still serves when the
// database cannot be asked: an outage of PostgreSQL must not turn every
// authenticated call (rate limit checks above all) into a 503, and no key
// can be revoked while the database is down anyway.
const (
	authCacheTTL     = 3 * time.Second
	authStaleIfError = 15 * time.Minute
	authCacheSize    = 10_000
	// authLookupTimeout bounds one key lookup (the cache's lookups are
	// shared by the calls waiting for them, so no one call's context
	// ends them).
	authLookupTimeout = 5 * time.Second
)

// authenticator checks bearer keys against the store through the cache of
// verified keys, as the gateway's and the Envoy service's (auth.Cache), so
// a request costs a map lookup, not a query.
type authenticator struct {
	keys        KeyStore
	now         func() time.Time
	signer      signer
	crossOrigin *http.CrossOriginProtection
	// local reports a client on this host, the only kind served while no
	// key is configured (Server.localClient); hostAllowed, whether it
	// names this host as it may while no key is configured (hosts.go).
	local       func(r *http.Request) bool
	hostAllowed func(r *http.Request) bool
	failures    authFailures // limits failed authentications (authlimit.go)

	byHash *auth.Cache

	mu        sync.Mutex
	anyKeys   bool
	anyKeysAt time.Time
	byID      map[string]auth.Key // every stored key, for sessions
	byIDAt    time.Time
}

func newAuthenticator(keys KeyStore, now func() time.Time, secret []byte) *authenticator {
	// Every answer serves stale, unknown and revoked keys' too, but only
	// while the store is unavailable (not for its other errors).
	byHash := auth.NewCache(keys, auth.CacheOptions{Now: now, TTL: authCacheTTL,
		StaleIfError: authStaleIfError, StaleRefusals: true,
		StaleIf:  func(err error) bool { return apperr.Is(err, apperr.Unavailable) },
		KnownMax: authCacheSize, UnknownMax: authCacheSize, LookupTimeout: authLookupTimeout})
	return &authenticator{keys: keys, now: now, byHash: byHash,
		signer: newSigner(secret), crossOrigin: http.NewCrossOriginProtection()}
}

// authorize admits r for scope or returns an Unauthorized/Forbidden error.
// Until the first key is ever created (keyless mode), only loopback
// clients naming a loopback or allowed host are served (hosts.go), as a
// caller with the zero Key (see callerOf); browsers among them only from
// the same origin, so a web page cannot drive a keyless local server.
// Once a key has existed, revoking every key leaves the API closed, never
// keyless again. Without a
// bearer key, a dashboard session cookie stands for its key (session.go).
func (a *authenticator) authorize(r *http.Request, scope auth.Scope) (auth.Key, error) {
	ctx := r.Context()
	configured, err := a.keysConfigured(ctx)
	if err != nil {
		return auth.Key{}, apperr.Wrap(apperr.Unavailable, err, "checking API keys failed")
	}
	if !configured {
		if !a.local(r) {
			return auth.Key{}, apperr.New(apperr.Forbidden, "no API keys are configured, so only loopback clients are served; create one with `sluice keys create`")
		}
		if !a.hostAllowed(r) {
			return auth.Key{}, errForeignHost(r)
		}
		if !safeMethod(r.Method) && a.crossOrigin.Check(r) != nil {
			return auth.Key{}, errCrossOrigin
		}
		return auth.Key{}, nil
	}
	secret, ok := bearer(r)
	if !ok {
		if ss, ok := a.sessionFrom(r); ok {
			return a.authorizeSession(r, ss, scope)
		}
		return auth.Key{}, apperr.New(apperr.Unauthorized, "missing API key: send Authorization: Bearer <key>")
	}
	key, err := a.checkSecret(r, secret)
	if err != nil {
		return auth.Key{}, err
	}
	if scope != anyScope && !key.Allows(scope) {
		return auth.Key{}, apperr.New(apperr.Forbidden, "this API key lacks the %q scope", scope)
	}
	return key, nil
}

// checkSecret returns the active key whose secret a client presented, or
// Unauthorized (counted as a failed authentication), or the refusal of a
// client over its failed-authentication limit (authlimit.go).
func (a *authenticator) checkSecret(r *http.Request, secret string) (auth.Key, error) {
	if err := a.failures.check(r); err != nil {
		return auth.Key{}, err
	}
	ans, err := a.byHash.Lookup(r.Context(), auth.SumSecret(secret))
	if err != nil {
		return auth.Key{}, apperr.Wrap(apperr.Unavailable, err, "checking the API key failed")
	}
	key := ans.Key
	if !ans.Found {
		return auth.Key{}, a.failures.failed(r, "unknown key", errBadKey)
	}
	if !key.Active() {
		return auth.Key{}, a.failures.failed(r, "revoked key "+key.ID, errBadKey)
	}
	return key, nil
}

var errBadKey = apperr.New(apperr.Unauthorized, "invalid or revoked API key")

var errCrossOrigin = apperr.New(apperr.Forbidden, "cross-origin request refused: a browser may change state only from this server's own pages, with the session's X-CSRF-Token")

// authorizeSession admits r, carrying session ss, for scope.
func (a *authenticator) authorizeSession(r *http.Request, ss session, scope auth.Scope) (auth.Key, error) {
	key, found, err := a.lookupID(r.Context(), ss.keyID)
	if err != nil {
		return auth.Key{}, apperr.Wrap(apperr.Unavailable, err, "checking the session's API key failed")
	}
	if !found || !key.Active() {
		return auth.Key{}, apperr.New(apperr.Unauthorized, "the session's API key was revoked; sign in again")
	}
	if !a.checkCSRF(r, ss) {
		return auth.Key{}, errCrossOrigin
	}
	if scope != anyScope && !key.Allows(scope) {
		return auth.Key{}, apperr.New(apperr.Forbidden, "this API key lacks the %q scope", scope)
	}
	return key, nil
}

// lookupID finds a key by id among every stored key, listed at most once
// per authCacheTTL (there are few keys; sessions are few requests).
func (a *authenticator) lookupID(ctx context.Context, id string) (auth.Key, bool, error) {
	now := a.now()
	a.mu.Lock()
	if a.byID != nil && now.Sub(a.byIDAt) < authCacheTTL {
		k, ok := a.byID[id]
		a.mu.Unlock()
		return k, ok, nil
	}
	a.mu.Unlock()
	keys, err := a.keys.ListAPIKeys(ctx)
	if err != nil {
		return auth.Key{}, false, err
	}
	byID := make(map[string]auth.Key, len(keys))
	for _, k := range keys {
		byID[k.ID] = k
	}
	a.mu.Lock()
	a.byID, a.byIDAt = byID, now
	a.mu.Unlock()
	k, ok := byID[id]
	return k, ok, nil
}

// callerKey is the context key of the authorized API key.
type callerKey struct{}

// callerOf returns the API key that authorized r: its ID and scopes. The
// zero Key (empty ID) is a keyless loopback client, served only while no
// key is configured, and trusted like an admin; public routes have it too.
func callerOf(r *http.Request) auth.Key {
	k, _ := r.Context().Value(callerKey{}).(auth.Key)
	return k
}

// keysConfigured reports whether keyless mode is over: a key was ever
// created (revoked since or not). Once true it stays true, and is not
// asked again.
func (a *authenticator) keysConfigured(ctx context.Context) (bool, error) {
	now := a.now()
	a.mu.Lock()
	if a.anyKeys || !a.anyKeysAt.IsZero() && now.Sub(a.anyKeysAt) < authCacheTTL {
		defer a.mu.Unlock()
		return a.anyKeys, nil
	}
	a.mu.Unlock()
	ever, err := a.keys.APIKeyEverCreated(ctx)
	if err != nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		if apperr.Is(err, apperr.Unavailable) && !a.anyKeysAt.IsZero() && now.Sub(a.anyKeysAt) < authStaleIfError {
			return a.anyKeys, nil
		}
		return false, err
	}
	a.mu.Lock()
	a.anyKeys, a.anyKeysAt = ever, now
	a.mu.Unlock()
	return ever, nil
}

// forget drops cached state so changes made through this server apply at once.
func (a *authenticator) forget() {
	a.byHash.Forget()
	a.mu.Lock()
	a.anyKeysAt = time.Time{}
	a.byID = nil
	a.mu.Unlock()
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// localClient reports whether r comes from this host: the TCP peer is a
// loopback address, and so is the client it speaks for, if it is a proxy
// that names one (a PROXY protocol header, or forwarding headers of a
// trusted proxy). So neither header can make a remote client look local:
// an untrusted peer's headers are not read, and a trusted proxy elsewhere
// is not loopback. A proxy on this host that names no client (not in
// --trusted-proxies, or sending no header) does make its clients look
// local; docs/operations.md warns of it.
func (s *Server) localClient(r *http.Request) bool {
	return isLoopback(edge.Peer(r)) && s.clients.ClientIP(r).IsLoopback()
}

func isLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
