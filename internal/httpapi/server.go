// Package httpapi is Sluice's HTTP adapter, serving the rate limit service
// (internal/limits), notifications (internal/notify), events and
// workflows (internal/workflow), topics and broadcasts (internal/audience),
// short links (internal/shorten) and API
// keys (internal/auth): routes on a stdlib
// ServeMux with method patterns, JSON in and out, RFC 9457 problem+json for
// every error, API-key auth with scopes, request ids, access logs,
// Prometheus metrics and the operations endpoints (/healthz, /readyz,
// /metrics, /openapi.json).
//
// Domain services reach it through small interfaces declared here, next to
// the handlers that use them; only cmd/sluice wires concrete types in.
//
// # Failed authentications
//
// Failed authentications are limited per client (authlimit.go), against
// guessing API keys (they carry 256 random bits, so guessing is hopeless
// anyway; the limit keeps a guesser from costing a database lookup per
// try and makes the attempt visible). A failure is a bearer key that is
// unknown or revoked, or such a key pasted into the dashboard's sign-in; a
// missing key, a wrong scope or a stale session cookie is not. Each
// failure charges 1 to the client's count in Options.AuthFailures (on the
// node's counter store, so the count is shared by every node with Redis).
// Once a failure is refused, every request of that client presenting a
// key, a valid one too, answers 429 with Retry-After until the limiter's
// retry time: if a valid key still went through, 429 would only mean
// "wrong key" and guessing would go on. That refusal is remembered in this
// process, so it costs no store call; another node refuses the client
// after its next failure there. Requests without a key, public routes
// included, are not affected. The client is its IP address (behind
// Options.TrustedProxies, the one they name); an IPv6 client is its /64,
// which one subscriber usually holds whole.
//
// # The DNS rebinding guard
//
// While no API key is configured, a loopback client is trusted like an
// admin. A web page on a domain the attacker controls can make that domain
// resolve to 127.0.0.1 after the page loaded: the browser then sends the
// page's requests to Sluice as same-origin ones, from a loopback peer, but
// with the attacker's name in Host. So keyless trust also needs a Host
// that is a loopback name or address (localhost, 127.0.0.0/8, ::1) or one
// of Options.AllowedHosts; anything else is refused with 403 (hosts.go).
// With keys configured, Host is not looked at: the key decides.
package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/breaker"
	"github.com/sluicehq/sluice/internal/edge"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

const (
	headerRequestID = "X-Request-Id"
	logKeyRequestID = "request_id"
)

// Check is one readiness probe: an engine Sluice depends on.
type Check struct {
	Name string
	Ping func(ctx context.Context) error
	// Detail, if not nil, adds what it returns to the check's result as
	// "detail" (the notification providers' breaker states): information,
	// not a verdict, since Ping alone decides readiness.
	Detail func() any
}

// Options configures a Server. Logger and Keys are required.
type Options struct {
	Logger *slog.Logger
	// Registry receives the HTTP metrics and is served at /metrics. If nil,
	// a fresh registry is used.
	Registry *prometheus.Registry
	// Keys stores API keys.
	Keys KeyStore
	// Checks are run by /readyz, concurrently, each within ReadyTimeout.
	Checks       []Check
	ReadyTimeout time.Duration // default 2s
	// MaxBodyBytes bounds request bodies; default 1 MiB.
	MaxBodyBytes int64
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Version is reported by /healthz.
	Version string
	// Ratelimit serves /v1/ratelimit/*. If nil, those routes answer 503.
	Ratelimit Ratelimiter
	// Links serves the URL shortener's routes. If nil, they answer 503
	// (and redirects 404).
	Links Links
	// UI configures the dashboard, its sessions and preference links.
	UI UIOptions
	// Preferences serves the end-user preference page's API. If nil,
	// those routes answer 503.
	Preferences Preferences
	// Notify serves the notification routes, the outbox's included; if
	// nil they answer 503.
	Notify NotifyService
	// Events serves /v1/event-subscriptions; if nil those routes answer
	// 503.
	Events EventSubscriptions
	// Workflows serves /v1/events, /v1/workflows and the runs' routes
	// (workflows.go); if nil they answer 503.
	Workflows Workflows
	// Attributes keeps users' attributes (/v1/users/{id}/attributes); if
	// nil those routes answer 503.
	Attributes UserAttributes
	// Audiences serves /v1/topics and /v1/broadcasts (topics.go,
	// broadcasts.go); if nil they answer 503.
	Audiences Audiences
	// TrustedProxies are the load balancers whose X-Forwarded-For and
	// Forwarded headers name the client (httplimit.Identifier.ClientIP):
	// for the access log, the unknown-code limit of redirects and the
	// keyless loopback check. None: the client is the peer.
	TrustedProxies []netip.Prefix
	// ProxyHeader is the forwarding header TrustedProxies write, the only
	// one read (httplimit.Identifier.Header); empty reads both.
	ProxyHeader httplimit.ProxyHeader
	// AllowedHosts are the names, besides loopback ones, a keyless
	// server answers to (the Host header, port ignored; see hostAllowed).
	AllowedHosts []string
	// AuthFailures limits failed authentications (unknown or revoked API
	// keys, in a bearer header or the dashboard's sign-in) per client
	// (authlimit.go). If nil, failures are not limited.
	AuthFailures AuthFailureLimiter
	// UnknownEmailLinks limits the lookups of unknown tracked email links
	// (GET /e/{token}) per client, as the shortener limits unknown codes.
	// If nil, they are not limited.
	UnknownEmailLinks AuthFailureLimiter
	// MetricsAuth makes /metrics require a valid API key, of any scope,
	// or a dashboard session. If false, /metrics is public.
	MetricsAuth bool
	// Inbox serves the in-app inbox's routes; if nil they answer 503.
	Inbox Inbox
	// InboxHeartbeat is how often an idle inbox stream sends a comment
	// line, so proxies and clients know it is alive; default 15s.
	InboxHeartbeat time.Duration
	// LinkLive serves the live link stats streams
	// (GET /v1/links/{code}/stats/stream); if nil they answer 503.
	LinkLive LinkLive
	// LinkLiveHeartbeat is how often an idle live link stats stream sends
	// a comment line; default 15s.
	LinkLiveHeartbeat time.Duration
	// Panics reports the panics of handlers (and of the streams they
	// serve) on the "http" surface: each is logged once with its stack
	// and counted; the request gets a 500 if nothing was written yet. If
	// nil, they are logged to slog.Default() and not counted.
	Panics *panics.Reporter
	// PublicURL, if set, is the root URL clients reach this service at
	// (ui.public_url), named as the server of /openapi.json; if empty,
	// the document names the scheme and Host each request used.
	PublicURL string
	// CORSOrigins are the origins (scheme://host[:port], or "*" for
	// every one) whose pages may call the API from a browser (cors.go);
	// none: no CORS headers at all.
	CORSOrigins []string
}

// Server routes and serves Sluice's HTTP API. Build it with New, register
// routes, then use it as an http.Handler. It is safe for concurrent use once
// serving starts; routes must all be registered before.
type Server struct {
	opts   Options
	log    *slog.Logger
	mux    *http.ServeMux
	routes []route // the route table, in registration order
	auth   *authenticator
	// unknownEmailLinks counts unknown tracked email links per client.
	unknownEmailLinks *authFailures
	// emailGate stands between tracked email links and the store while
	// the store is down: one lookup at a time reaches it.
	emailGate breaker.Breaker
	clients   httplimit.Identifier
	metrics   *httpMetrics
	reqSeq    atomic.Uint64
	reqPfx    string
	cors      *cors // nil without Options.CORSOrigins
}

// New returns a Server with the operations and key routes registered.
func New(opts Options) *Server {
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 2 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var pfx [4]byte
	_, _ = rand.Read(pfx[:])
	s := &Server{
		opts:    opts,
		log:     opts.Logger,
		mux:     http.NewServeMux(),
		auth:    newAuthenticator(opts.Keys, opts.Now, opts.UI.Secret),
		clients: httplimit.Identifier{TrustedProxies: opts.TrustedProxies, Header: opts.ProxyHeader},
		metrics: newHTTPMetrics(opts.Registry),
		reqPfx:  hex.EncodeToString(pfx[:]),
		cors:    newCORS(opts.CORSOrigins),
	}
	s.auth.local = s.localClient
	s.auth.failures = authFailures{limiter: opts.AuthFailures, client: s.clients.ClientIP, log: opts.Logger,
		now: opts.Now, blocked: make(map[string]time.Time)}
	s.unknownEmailLinks = &authFailures{limiter: opts.UnknownEmailLinks, tokens: true, client: s.clients.ClientIP, log: opts.Logger,
		now: opts.Now, blocked: make(map[string]time.Time)}
	s.auth.hostAllowed = func(r *http.Request) bool { return hostAllowed(r, s.opts.AllowedHosts) }
	s.registerOps()
	s.registerKeys()
	s.registerRatelimit()
	s.registerLinks()
	s.registerUI()
	s.registerStats()
	s.registerLinkClicks()
	s.registerLinkStats()
	s.registerLinkLive()
	s.registerPreferences()
	s.registerNotify()
	s.registerProviders()
	s.registerEventSubs()
	s.registerInbox()
	s.registerWorkflows()
	s.registerAudiences()
	return s
}

// public marks a route that needs no API key; anyScope, one that needs a
// valid key (or session) whatever its scopes (/metrics with MetricsAuth).
const (
	public   auth.Scope = ""
	anyScope auth.Scope = "*"
)

// handlerFunc is an HTTP handler that returns its error for the frame to
// render as problem+json.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// serviceHandler is a handler of one service's routes, handed the service.
type serviceHandler[S any] func(svc S, w http.ResponseWriter, r *http.Request) error

// withService adapts the handlers of svc's routes: each is handed svc, or
// answers 503 with the message missing while svc is nil (the service is
// not configured on this server), so no handler checks.
func withService[S any](svc S, missing string) func(serviceHandler[S]) handlerFunc {
	return func(h serviceHandler[S]) handlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error {
			if any(svc) == nil {
				return apperr.New(apperr.Unavailable, "%s", missing)
			}
			return h(svc, w, r)
		}
	}
}

// route is one entry of the route table: a pattern and the scope it
// requires (public: none). The table is what the security tests walk
// (routescope_test.go), so every route declares its scope in one place.
type route struct {
	pattern string
	scope   auth.Scope
}

// Handle registers h for pattern (a ServeMux method pattern such as
// "GET /v1/keys/{id}"), requiring scope unless scope is public.
func (s *Server) Handle(pattern string, scope auth.Scope, h handlerFunc) {
	s.routes = append(s.routes, route{pattern: pattern, scope: scope})
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if scope != public {
			key, err := s.auth.authorize(r, scope)
			if err != nil {
				writeError(w, r, s.log, err)
				return
			}
			if key.ID != "" {
				r = r.WithContext(context.WithValue(r.Context(), callerKey{}, key))
			}
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
		if err := h(w, r); err != nil {
			writeError(w, r, s.log, err)
		}
	})
}

// Routes returns the registered patterns, sorted.
func (s *Server) Routes() []string {
	out := make([]string, len(s.routes))
	for i, rt := range s.routes {
		out[i] = rt.pattern
	}
	slices.Sort(out)
	return out
}

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// ServeHTTP wraps the mux with request ids, recovery, access logs, metrics
// and problem+json for unmatched routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.opts.Now()
	id := r.Header.Get(headerRequestID)
	if id == "" || !validRequestID.MatchString(id) {
		// Not fmt.Sprintf: this runs on every request, redirects included.
		id = s.reqPfx + "-" + strconv.FormatUint(s.reqSeq.Add(1), 16)
	}
	w.Header().Set(headerRequestID, id)
	rec := recorders.Get().(*recorder)
	*rec = recorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.opts.Panics.Report(r.Context(), panics.HTTP, p, slog.String(logKeyRequestID, id), slog.String("route", r.Pattern))
			if !rec.wrote {
				// Not writeError: the panic is logged once, above.
				WriteProblem(rec, r, problemOf(errPanicked))
			}
		}
		s.observe(r, rec, id, s.opts.Now().Sub(start))
		*rec = recorder{}
		recorders.Put(rec)
	}()
	if s.cors.serve(rec, r) { // a preflight, answered (cors.go)
		return
	}
	// One route match: unmatched requests reach the catch-all "/" handler
	// (notRouted), which answers 404 or 405 as problem+json.
	s.mux.ServeHTTP(rec, r)
}

// errPanicked is the error of a request whose handler panicked: an
// internal error, the detail in the log.
var errPanicked = errors.New("handler panicked")

var recorders = sync.Pool{New: func() any { return new(recorder) }}

// probeMethods are the methods notRouted tries when computing Allow.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// notRouted is the catch-all: 405 with Allow when the path has routes for
// other methods, 404 otherwise.
func (s *Server) notRouted(w http.ResponseWriter, r *http.Request) {
	var allow []string
	probe := r.Clone(r.Context())
	for _, m := range probeMethods {
		probe.Method = m
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		WriteProblem(w, r, NewProblem(http.StatusNotFound, "not-found", "", "no route for "+r.Method+" "+r.URL.Path))
		return
	}
	list := strings.Join(allow, ", ")
	w.Header().Set("Allow", list)
	WriteProblem(w, r, NewProblem(http.StatusMethodNotAllowed, "method-not-allowed", "",
		fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, list)))
}

// standardMethods bounds the method label of metrics: anything else is OTHER.
var standardMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

func (s *Server) observe(r *http.Request, rec *recorder, id string, d time.Duration) {
	route := r.Pattern
	switch {
	case route == "" || route == "/":
		route = "unmatched"
	default:
		if _, path, ok := strings.Cut(route, " "); ok {
			route = path
		}
	}
	method := r.Method
	if !standardMethods[method] {
		method = "OTHER"
	}
	s.metrics.observe(route, method, rec.status, d)
	level := slog.LevelInfo
	// Probes, scrapes, short-link redirects, rate limit checks and single
	// notifications log at Debug when they succeed: they are frequent, and
	// a redirect's record is its click, a check's its
	// sluice_ratelimit_checks_total count, a notification's the
	// notification itself, an event's the event (what their access log
	// cost at Info: docs/benchmarks.md, "The access log of frequent
	// routes").
	switch route {
	case "/healthz", "/readyz", "/metrics", "/{code}", "/v1/ratelimit/check":
		level = slog.LevelDebug
	case "/v1/notifications", "/v1/events":
		if method == http.MethodPost && rec.status < 400 {
			level = slog.LevelDebug
		}
	}
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String(logKeyRequestID, id),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("route", route),
		slog.Int("status", rec.status),
		slog.Int64("bytes", rec.bytes),
		slog.Duration("duration", d),
		slog.String("remote", s.clientAddr(r)),
	}
	if peer := edge.Peer(r); peer != r.RemoteAddr || s.clients.TrustedPeer(r) {
		attrs = append(attrs, slog.String("peer", peer)) // the proxy the client came through
	}
	s.log.LogAttrs(r.Context(), level, "http request", attrs...)
}

// recorder remembers the status and size of a response.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the real writer (Flush, deadlines).
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
