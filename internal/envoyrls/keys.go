package envoyrls

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
)

// KeyStore is what the service needs from the API key store (*store.DB)
// to require keys (Options.Keys).
type KeyStore interface {
	APIKeyByHash(ctx context.Context, hash string) (auth.Key, error)
}

// The key cache, as the HTTP API's and the gateway's: the store is asked
// about a key at most once per keyCacheTTL (so a revoked key is refused
// within it), a known key is still served from its last answer for
// keyStaleIfError while the store fails, and unknown keys (only
// well-formed ones reach the store) are remembered in a smaller map. Both
// maps are cleared when full: bounded memory, whatever callers send. A
// lookup waits at most keyLookupTimeout; calls for a key being looked up
// wait for that lookup instead of making their own.
const (
	keyCacheTTL      = 3 * time.Second
	keyStaleIfError  = 15 * time.Minute
	knownKeysMax     = 10_000
	unknownKeysMax   = 1_000
	keyLookupTimeout = 250 * time.Millisecond
)

// Log attribute keys of refused calls.
const (
	logReason = "reason"
	logPeer   = "peer"
	logKeyID  = "key_id"
)

// keyCheck admits ShouldRateLimit calls carrying an API key with
// auth.ScopeRatelimitCheck. It is safe for concurrent use.
type keyCheck struct {
	store   KeyStore
	now     func() time.Time
	log     *slog.Logger
	refused *prometheus.CounterVec

	known, unknown    sync.Map // [sha256.Size]byte -> *keyAnswer
	nKnown, nUnknown  atomic.Int64
	mu                sync.Mutex
	inflight          map[[sha256.Size]byte]*keyLookup
	lastLog, unlogged atomic.Int64
}

// keyAnswer is what the store said of one key, and when.
type keyAnswer struct {
	key   auth.Key
	found bool
	at    time.Time
}

// keyLookup is one store lookup other calls for the same key wait for.
type keyLookup struct {
	done chan struct{}
	ans  *keyAnswer // nil when the store failed
	err  error
}

func newKeyCheck(store KeyStore, now func() time.Time, log *slog.Logger, reg prometheus.Registerer) *keyCheck {
	k := &keyCheck{store: store, now: now, log: log, inflight: make(map[[sha256.Size]byte]*keyLookup),
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
	var buf [64]byte // a plausible secret is 46 bytes: hashed from the stack, no allocation
	ans, err := k.lookup(ctx, sha256.Sum256(buf[:copy(buf[:], secret)]))
	switch {
	case err != nil:
		return k.refuse(ctx, errKeyStore, "key store failed: "+err.Error(), "")
	case !ans.found:
		return k.refuse(ctx, errBadKey, "unknown key", "")
	case !ans.key.Active():
		return k.refuse(ctx, errBadKey, "revoked key", ans.key.ID)
	case !ans.key.Allows(auth.ScopeRatelimitCheck):
		return k.refuse(ctx, errScope, "scope missing", ans.key.ID)
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

// lookup returns what the store says of the key hashed to sum, from the
// cache when the answer is fresh.
func (k *keyCheck) lookup(ctx context.Context, sum [sha256.Size]byte) (*keyAnswer, error) {
	now := k.now()
	if v, ok := k.known.Load(sum); ok && now.Sub(v.(*keyAnswer).at) < keyCacheTTL {
		return v.(*keyAnswer), nil
	}
	if v, ok := k.unknown.Load(sum); ok && now.Sub(v.(*keyAnswer).at) < keyCacheTTL {
		return v.(*keyAnswer), nil
	}
	k.mu.Lock()
	l, waiting := k.inflight[sum]
	if !waiting {
		l = &keyLookup{done: make(chan struct{})}
		k.inflight[sum] = l
	}
	k.mu.Unlock()
	if !waiting {
		l.ans, l.err = k.ask(ctx, sum, now)
		k.mu.Lock()
		delete(k.inflight, sum)
		k.mu.Unlock()
		close(l.done)
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return l.ans, l.err
}

// ask asks the store about the key hashed to sum and caches the answer.
// When the store fails, a known key's answer younger than keyStaleIfError
// is returned instead of the error.
func (k *keyCheck) ask(ctx context.Context, sum [sha256.Size]byte, now time.Time) (*keyAnswer, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keyLookupTimeout)
	defer cancel()
	key, err := k.store.APIKeyByHash(ctx, hex.EncodeToString(sum[:]))
	if err != nil && !apperr.Is(err, apperr.NotFound) {
		if v, ok := k.known.Load(sum); ok && now.Sub(v.(*keyAnswer).at) < keyStaleIfError {
			return v.(*keyAnswer), nil
		}
		return nil, err
	}
	ans := &keyAnswer{key: key, found: err == nil, at: now}
	m, n, limit := &k.unknown, &k.nUnknown, int64(unknownKeysMax)
	if ans.found && key.Active() {
		m, n, limit = &k.known, &k.nKnown, knownKeysMax
	} else if _, ok := k.known.LoadAndDelete(sum); ok {
		k.nKnown.Add(-1)
	}
	if n.Load() >= limit {
		m.Clear() // crude but bounded; a full map means many distinct keys, or an attack
		n.Store(0)
	}
	if _, had := m.Swap(sum, ans); !had {
		n.Add(1)
	}
	return ans, nil
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
