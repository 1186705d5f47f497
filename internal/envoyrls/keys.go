package envoyrls

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/auth"
)

// KeyStore is what the service needs from the API key store (*store.DB)
// to require keys (Options.Keys).
type KeyStore = auth.KeyStore

// Log attribute keys of refused calls.
const (
	logReason = "reason"
	logPeer   = "peer"
	logKeyID  = "key_id"
)

// keyCheck admits ShouldRateLimit calls carrying an API key with
// auth.ScopeRatelimitCheck. It is safe for concurrent use.
type keyCheck struct {
	// keys is the cache of verified keys, as the HTTP API's and the
	// gateway's (auth.Cache): the store is asked about a key at most once
	// per 3 seconds (so a revoked key is refused within it), a known key
	// is still served from its last answer for 15 minutes while the store
	// fails, and a lookup waits at most 250ms.
	keys    *auth.Cache
	log     *slog.Logger
	refused *prometheus.CounterVec

	lastLog, unlogged atomic.Int64
}

func newKeyCheck(store KeyStore, now func() time.Time, log *slog.Logger, reg prometheus.Registerer) *keyCheck {
	k := &keyCheck{keys: auth.NewCache(store, auth.CacheOptions{Now: now}), log: log,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_envoy_auth_refused_total",
			Help: "ShouldRateLimit calls refused by --grpc-require-key, by gRPC code (Unauthenticated, PermissionDenied, Unavailable).",
		}, []string{"code"})}
	if reg != nil {
		reg.MustRegister(k.refused)
	}
	return k
}

var (
	errNoKey    = status.Error(codes.Unauthenticated, "missing API key: send authorization: Bearer <key> or x-api-key metadata")
	errBadKey   = status.Error(codes.Unauthenticated, "invalid or revoked API key")
	errScope    = status.Errorf(codes.PermissionDenied, "this API key lacks the %q scope", auth.ScopeRatelimitCheck)
	errKeyStore = status.Error(codes.Unavailable, "checking the API key failed")
)

// authorize returns nil when ctx's metadata carries an active key with
// the ratelimit:check scope, else the gRPC error to answer.
func (k *keyCheck) authorize(ctx context.Context) error {
	secret, ok := secretOf(ctx)
	if !ok {
		return k.refuse(ctx, errNoKey, "missing key", "")
	}
	if !auth.Plausible(secret) {
		return k.refuse(ctx, errBadKey, "malformed key", "")
	}
	ans, err := k.keys.Lookup(ctx, auth.SumSecret(secret))
	switch {
	case err != nil:
		return k.refuse(ctx, errKeyStore, "key store failed: "+err.Error(), "")
	case !ans.Found:
		return k.refuse(ctx, errBadKey, "unknown key", "")
	case !ans.Key.Active():
		return k.refuse(ctx, errBadKey, "revoked key", ans.Key.ID)
	case !ans.Key.Allows(auth.ScopeRatelimitCheck):
		return k.refuse(ctx, errScope, "scope missing", ans.Key.ID)
	}
	return nil
}

// secretOf returns the key in ctx's metadata: authorization: Bearer <key>,
// else x-api-key.
func secretOf(ctx context.Context) (string, bool) {
	if v := metadata.ValueFromIncomingContext(ctx, "authorization"); len(v) > 0 {
		scheme, token, ok := strings.Cut(v[0], " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			if token = strings.TrimSpace(token); token != "" {
				return token, true
			}
		}
	}
	if v := metadata.ValueFromIncomingContext(ctx, "x-api-key"); len(v) > 0 {
		if token := strings.TrimSpace(v[0]); token != "" {
			return token, true
		}
	}
	return "", false
}

// refuse counts and logs a refused call (at most one log line a second)
// and returns err.
func (k *keyCheck) refuse(ctx context.Context, err error, reason, keyID string) error {
	k.refused.WithLabelValues(status.Code(err).String()).Inc()
	now := time.Now().UnixNano()
	last := k.lastLog.Load()
	if now-last < int64(time.Second) || !k.lastLog.CompareAndSwap(last, now) {
		k.unlogged.Add(1)
		return err
	}
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	k.log.Warn("envoy rate limit call refused", logReason, reason, logPeer, addr, logKeyID, keyID,
		logUnlogged, k.unlogged.Swap(0))
	return err
}
