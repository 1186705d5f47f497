package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Failed authentications are limited per client: see the package doc,
// "Failed authentications".

// AuthFailureLimiter counts failed authentications per client; a
// ratelimit.PolicyLimiter is one.
type AuthFailureLimiter interface {
	Allow(ctx context.Context, key string, cost int64) (ratelimit.Decision, error)
}

// authLimitedError refuses a client over its failed-authentication limit,
// or, with tokens, over its limit of unknown tracked email links.
type authLimitedError struct {
	retryAfter time.Duration
	tokens     bool
}

func (e *authLimitedError) Error() string {
	return "too many " + e.what() + " from this client; retry after " + e.retryAfter.Round(time.Second).String()
}

func (e *authLimitedError) what() string {
	if e.tokens {
		return "unknown tracked links"
	}
	return "failed authentications"
}

// writeAuthLimited answers e as a 429 problem with Retry-After.
func writeAuthLimited(w http.ResponseWriter, r *http.Request, e *authLimitedError) {
	secs := int64((e.retryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(max(1, secs), 10))
	if e.tokens { // as the redirect route refuses unknown codes
		WriteProblem(w, r, NewProblem(http.StatusTooManyRequests, "quota-exceeded", "", e.Error()))
		return
	}
	WriteProblem(w, r, NewProblem(http.StatusTooManyRequests, "too-many-failed-authentications",
		"Too many failed authentications", e.Error()))
}

// blockedClientsMax bounds the clients remembered as over their limit.
const blockedClientsMax = 10_000

// authFailures is the authenticator's failure accounting.
type authFailures struct {
	limiter AuthFailureLimiter // nil: no limit
	// tokens: this accounting counts unknown tracked email links
	// (GET /e/{token}, see emailHit) instead of failed authentications.
	tokens bool
	client func(r *http.Request) netip.Addr
	log    *slog.Logger
	now    func() time.Time

	mu      sync.Mutex
	blocked map[string]time.Time // client key -> until
	// any is set once blocked has an entry, so that until a client is
	// ever limited, authenticated requests pay no lock for the check.
	any atomic.Bool
}

// clientKey is the limiter key of r's client: "auth_fail:" and its IPv4
// address or IPv6 /64.
func (f *authFailures) clientKey(r *http.Request) string {
	prefix := "auth_fail:"
	if f.tokens {
		prefix = "email_unknown:"
	}
	ip := f.client(r)
	if !ip.IsValid() {
		return prefix + r.RemoteAddr
	}
	if ip.Is6() {
		ip = netip.PrefixFrom(ip, 64).Masked().Addr()
	}
	return prefix + ip.String()
}

// check returns the refusal of a client still over its limit, or nil.
func (f *authFailures) check(r *http.Request) error {
	if f.limiter == nil || !f.any.Load() {
		return nil
	}
	k := f.clientKey(r)
	f.mu.Lock()
	until, ok := f.blocked[k]
	f.mu.Unlock()
	if ok {
		if left := until.Sub(f.now()); left > 0 {
			return &authLimitedError{retryAfter: left, tokens: f.tokens}
		}
	}
	return nil
}

// failed records a failed authentication of r (why, never the key) and
// returns unauthorized, or the refusal when the client is over its
// limit. A limiter error is logged and lets the failure through as
// unauthorized: an outage of the counter store must not lock clients out.
func (f *authFailures) failed(r *http.Request, why string, unauthorized error) error {
	event := "authentication failed"
	if f.tokens {
		event = "unknown tracked link"
	}
	f.log.LogAttrs(r.Context(), slog.LevelInfo, event,
		slog.String("reason", why), slog.String("route", r.Pattern), slog.String("remote", f.client(r).String()))
	if f.limiter == nil {
		return unauthorized
	}
	k := f.clientKey(r)
	d, err := f.limiter.Allow(r.Context(), k, 1)
	if err != nil {
		f.log.LogAttrs(r.Context(), slog.LevelWarn, "failed-authentication limiter failed", slog.Any("error", err))
		return unauthorized
	}
	if d.Allowed {
		return unauthorized
	}
	f.mu.Lock()
	if len(f.blocked) >= blockedClientsMax {
		clear(f.blocked) // bounded and crude: the limiter still refuses them on their next failure
	}
	f.blocked[k] = f.now().Add(d.RetryAfter)
	f.any.Store(true)
	f.mu.Unlock()
	f.log.LogAttrs(r.Context(), slog.LevelWarn, "client over its limit of "+(&authLimitedError{tokens: f.tokens}).what(),
		slog.String("remote", f.client(r).String()), slog.Duration("retry_after", d.RetryAfter))
	return &authLimitedError{retryAfter: d.RetryAfter, tokens: f.tokens}
}
