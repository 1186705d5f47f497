package envoyrls

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/ratelimit"
)

// KeyStore is what the service needs from the API key store (*store.DB)
// to require keys (Options.Keys).
type KeyStore = auth.KeyStore

// AuthFailureLimiter counts failed key checks per client
// (Options.AuthFailures); a ratelimit.PolicyLimiter is one, and Sluice
// hands in the HTTP API's (--auth-failures-per-minute).
type AuthFailureLimiter interface {
	Allow(ctx context.Context, key string, cost int64) (ratelimit.Decision, error)
}

// Log attribute keys of refused calls.
const (
	logReason     = "reason"
	logPeer       = "peer"
	logKeyID      = "key_id"
	logRetryAfter = "retry_after"
)

// blockedClientsMax bounds the clients remembered as over their
// failed-key limit.
const blockedClientsMax = 10_000

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
	now     func() time.Time

	// failures counts unknown, revoked and malformed keys per client
	// (nil: no limit); blocked remembers the clients refused by it, and
	// until when, so a blocked client costs no store call. anyBlocked is
	// set once blocked has an entry: until then calls take no lock.
	failures   AuthFailureLimiter
	mu         sync.Mutex
	blocked    map[string]time.Time
	anyBlocked atomic.Bool

	lastLog, unlogged atomic.Int64
}

func newKeyCheck(store KeyStore, failures AuthFailureLimiter, now func() time.Time, log *slog.Logger, reg prometheus.Registerer) *keyCheck {
	k := &keyCheck{keys: auth.NewCache(store, auth.CacheOptions{Now: now}), log: log, now: now,
		failures: failures, blocked: make(map[string]time.Time),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_envoy_auth_refused_total",
			Help: "ShouldRateLimit calls refused by --grpc-require-key, by gRPC code (Unauthenticated, PermissionDenied, Unavailable; ResourceExhausted: the client is over --auth-failures-per-minute).",
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
// the ratelimit:check scope, else the gRPC error to answer. A malformed,
// unknown or revoked key is a failure charged to the client (the peer's
// IP address, an IPv6 one's /64); a client over its limit is refused
// with RESOURCE_EXHAUSTED whatever key it sends, until the limiter lets
// it try again.
func (k *keyCheck) authorize(ctx context.Context) error {
	secret, ok := secretOf(ctx)
	if !ok {
		return k.refuse(ctx, errNoKey, "missing key", "")
	}
	client := clientKey(ctx)
	if err := k.checkBlocked(client); err != nil {
		return k.refuse(ctx, err, "over the failed-authentication limit", "")
	}
	if !auth.Plausible(secret) {
		return k.failed(ctx, client, "malformed key", "")
	}
	ans, err := k.keys.Lookup(ctx, auth.SumSecret(secret))
	switch {
	case err != nil:
		return k.refuse(ctx, errKeyStore, "key store failed: "+err.Error(), "")
	case !ans.Found:
		return k.failed(ctx, client, "unknown key", "")
	case !ans.Key.Active():
		return k.failed(ctx, client, "revoked key", ans.Key.ID)
	case !ans.Key.Allows(auth.ScopeRatelimitCheck):
		return k.refuse(ctx, errScope, "scope missing", ans.Key.ID)
	}
	return nil
}

// clientKey is the failure limiter's key of ctx's peer: "auth_fail:" and
// its IPv4 address or IPv6 /64, the HTTP API's key for the same client,
// so both count against one budget.
func clientKey(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return "auth_fail:"
	}
	var ip netip.Addr
	if tcp, ok := p.Addr.(*net.TCPAddr); ok {
		ip = tcp.AddrPort().Addr().Unmap().WithZone("")
	} else if ap, err := netip.ParseAddrPort(p.Addr.String()); err == nil {
		ip = ap.Addr().Unmap().WithZone("")
	}
	if !ip.IsValid() {
		return "auth_fail:" + p.Addr.String()
	}
	if ip.Is6() {
		ip = netip.PrefixFrom(ip, 64).Masked().Addr()
	}
	return "auth_fail:" + ip.String()
}

// limitedError refuses a client over its failed-key limit.
func limitedError(retryAfter time.Duration) error {
	secs := max(1, int64((retryAfter+time.Second-1)/time.Second))
	return status.Error(codes.ResourceExhausted,
		fmt.Sprintf("too many failed authentications from this client; retry after %ds", secs))
}

// checkBlocked returns the refusal of a client still over its limit, or
// nil.
func (k *keyCheck) checkBlocked(client string) error {
	if k.failures == nil || !k.anyBlocked.Load() {
		return nil
	}
	k.mu.Lock()
	until, ok := k.blocked[client]
	k.mu.Unlock()
	if ok {
		if left := until.Sub(k.now()); left > 0 {
			return limitedError(left)
		}
	}
	return nil
}

// failed charges a failed key to client and returns errBadKey, or the
// refusal when the client is now over its limit. A limiter error is
// logged and answers errBadKey: an outage of the counter store must not
// lock clients out.
func (k *keyCheck) failed(ctx context.Context, client, reason, keyID string) error {
	if k.failures == nil {
		return k.refuse(ctx, errBadKey, reason, keyID)
	}
	d, err := k.failures.Allow(ctx, client, 1)
	if err != nil {
		k.log.Warn("failed-authentication limiter failed", logError, err)
		return k.refuse(ctx, errBadKey, reason, keyID)
	}
	if d.Allowed {
		return k.refuse(ctx, errBadKey, reason, keyID)
	}
	k.mu.Lock()
	if len(k.blocked) >= blockedClientsMax {
		clear(k.blocked) // bounded and crude: the limiter still refuses them on their next failure
	}
	k.blocked[client] = k.now().Add(d.RetryAfter)
	k.anyBlocked.Store(true)
	k.mu.Unlock()
	k.log.Warn("grpc client over its failed-authentication limit", logPeer, peerOf(ctx), logRetryAfter, d.RetryAfter)
	return k.refuse(ctx, limitedError(d.RetryAfter), reason, keyID)
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
	k.log.Warn("envoy rate limit call refused", logReason, reason, logPeer, peerOf(ctx), logKeyID, keyID,
		logUnlogged, k.unlogged.Swap(0))
	return err
}

// peerOf is ctx's peer address, or "".
func peerOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// Authorize applies Options.Keys to a call of another service on the same
// listener (the rate limit quota service's streams): nil when no key is
// required or the call's key holds the scope, else the status error
// ShouldRateLimit would answer.
func (s *Server) Authorize(ctx context.Context) error {
	if s.keys == nil {
		return nil
	}
	return s.keys.authorize(ctx)
}
