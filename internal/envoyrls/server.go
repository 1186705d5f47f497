package envoyrls

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/ratelimit"
)

// Log attribute keys.
const (
	logFile     = "file"
	logError    = "error"
	logDomain   = "domain"
	logDomains  = "domains"
	logAnswer   = "answer"
	logUnlogged = "unlogged_since_last"
)

// Options configures a Server.
type Options struct {
	// Store keeps the counters. Required. Sluice hands in the node's shared
	// store (memory, or Redis with its in-memory failover).
	Store ratelimit.Store
	// Logger receives reloads and store failures. If nil, nothing is logged.
	Logger *slog.Logger
	// Registerer receives the sluice_envoy_* metrics. If nil, they are kept
	// but not registered.
	Registerer prometheus.Registerer
	// Now is the clock of rules that need no store (requests_per_unit: 0
	// reports when its window ends). If nil, time.Now is used.
	Now func() time.Time
	// FailClosed answers gRPC UNAVAILABLE when the store fails, so Envoy's
	// own failure_mode_deny decides. If false (the default), the service
	// fails open: every descriptor is answered OK, the error is logged (at
	// most once a second) and counted in sluice_envoy_store_errors_total.
	FailClosed bool
	// NearLimitRatio is the share of a limit past which an allowed
	// descriptor counts as near its limit. If 0, 0.8 is used, as in
	// envoyproxy/ratelimit.
	NearLimitRatio float64
	// Blocked reports whether an emergency block refuses requests in
	// domain carrying the descriptor entry key=value at now, and until
	// when. It is asked for every entry of every request, configured
	// domain or not, so it must be quick and not allocate; Sluice hands in
	// limits.Rules.EntryBlocked. A blocked descriptor answers OVER_LIMIT
	// until the block ends, and its request charges nothing. If nil,
	// nothing is blocked.
	Blocked func(domain, key, value string, now time.Time) (until time.Time, blocked bool)
	// DetailedMetricValues bounds the descriptor label values a domain's
	// detailed_metric rules make: the first DetailedMetricValues distinct
	// descriptors seen get their own series, later ones are counted under
	// descriptor="other". The set lasts as long as the process (a reload
	// keeps it). If 0, 100 is used.
	DetailedMetricValues int
	// Keys, when set, makes ShouldRateLimit require an API key in the
	// call's metadata (authorization: Bearer <key>, or x-api-key) that is
	// active in Keys and holds auth.ScopeRatelimitCheck (or admin), as
	// POST /v1/ratelimit/check does: a call without a valid key answers
	// UNAUTHENTICATED, one whose key lacks the scope PERMISSION_DENIED,
	// and one whose key could not be checked UNAVAILABLE. Answers are
	// cached (auth.Cache), so a call with a known key asks Keys at most once
	// per 3 seconds. Other services on the gRPC server (health,
	// reflection) are not concerned. If nil, any caller is served.
	Keys KeyStore
	// AuthFailures, with Keys, limits failed key checks per client, as
	// the HTTP API's --auth-failures-per-minute does: a malformed,
	// unknown or revoked key charges 1 to the client's count (the gRPC
	// peer's IP address, an IPv6 one's /64; the HTTP API's key for that
	// address, so both count against one budget when they share the
	// limiter). Once a charge is refused, every call of that client
	// presenting a key, a valid one too, answers RESOURCE_EXHAUSTED
	// until the limiter's retry time. Behind a proxy every call has the
	// proxy's address, so one bad key locks all its calls out. If nil,
	// failures are not limited.
	AuthFailures AuthFailureLimiter
	// OnConfig is called with every Config put in force, the first one by
	// New, after it is in force (the rate limit quota service, which reads
	// the same rules, re-evaluates its buckets). If nil, nothing is called.
	OnConfig func(*Config)
}

// Server implements envoy.service.ratelimit.v3.RateLimitService. It is safe
// for concurrent use; SetConfig swaps its rules atomically while calls are
// in flight (each call sees one Config from start to end).
type Server struct {
	rlspb.UnimplementedRateLimitServiceServer

	store      ratelimit.Store
	log        *slog.Logger
	now        func() time.Time
	failClosed bool
	nearRatio  float64
	blocked    func(domain, key, value string, now time.Time) (time.Time, bool)
	onConfig   func(*Config)
	m          *metrics
	keys       *keyCheck // nil: no key required
	// unknownBlocked counts blocked descriptors of unconfigured domains.
	unknownBlocked prometheus.Counter

	state atomic.Pointer[state]

	reloadMu    sync.Mutex // serialises Reload
	lastErrLog  atomic.Int64
	errsSkipped atomic.Int64
}

// state is a Config with its metric series, swapped as one.
type state struct {
	cfg    *Config
	series map[*domain]*series
	sync   map[string]time.Duration // policy name: interval of each sync: local rule
}

var _ rlspb.RateLimitServiceServer = (*Server)(nil)

// New returns a Server applying cfg (nil: no domains) on opts.Store.
func New(cfg *Config, opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("envoyrls: Options.Store is required")
	}
	s := &Server{
		store:      opts.Store,
		log:        opts.Logger,
		now:        opts.Now,
		failClosed: opts.FailClosed,
		nearRatio:  opts.NearLimitRatio,
		blocked:    opts.Blocked,
		onConfig:   opts.OnConfig,
		m:          newMetrics(opts.Registerer, cmp.Or(opts.DetailedMetricValues, 100)),
	}
	s.unknownBlocked = s.m.blocked.WithLabelValues("")
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.nearRatio <= 0 || s.nearRatio > 1 {
		s.nearRatio = 0.8
	}
	if opts.Keys != nil {
		s.keys = newKeyCheck(opts.Keys, opts.AuthFailures, s.now, s.log, opts.Registerer)
	}
	s.SetConfig(cfg)
	return s, nil
}

// Register registers s on a gRPC server.
func (s *Server) Register(r grpc.ServiceRegistrar) { rlspb.RegisterRateLimitServiceServer(r, s) }

// Config returns the Config in force.
func (s *Server) Config() *Config { return s.state.Load().cfg }

// SetConfig puts cfg in force for every call that starts after it returns.
func (s *Server) SetConfig(cfg *Config) {
	if cfg == nil {
		cfg = &Config{}
	}
	st := &state{cfg: cfg, series: make(map[*domain]*series, len(cfg.domains)), sync: cfg.syncIntervals()}
	for name, d := range cfg.domains {
		st.series[d] = s.m.series(name, "")
	}
	s.state.Store(st)
	if s.onConfig != nil {
		s.onConfig(cfg)
	}
}

// Reload loads path and puts it in force. When it is bad, the error is
// logged with the file's name and returned, the failure is counted, and the
// previous Config stays in force.
func (s *Server) Reload(path string) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	cfg, err := Load(path)
	if err != nil {
		s.m.reloadFailures.Inc()
		s.log.Error("envoy rate limit config rejected; previous rules stay in force", logFile, path, logError, err)
		return err
	}
	s.SetConfig(cfg)
	s.m.reloads.Inc()
	s.log.Info("envoy rate limit config loaded", logFile, path, logDomains, len(cfg.domains))
	return nil
}

// ShouldRateLimit implements RateLimitServiceServer. See the package
// documentation for the rules it applies.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	if s.keys != nil {
		if err := s.keys.authorize(ctx); err != nil {
			return nil, err
		}
	}
	if err := validateRequest(req); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	st := s.state.Load()
	d := st.cfg.domains[req.Domain]
	resp := newResponse(len(req.Descriptors))
	if d == nil && s.blocked == nil {
		return resp, nil
	}
	c, err := s.plan(d, req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	defer c.release()
	if d == nil && !c.blocked {
		return resp, nil // unknown domain: OK with no limit
	}
	if err := s.decide(ctx, c); err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		s.m.storeErrors.WithLabelValues(d.name).Inc()
		s.logStoreError(d.name, err)
		if s.failClosed {
			return nil, status.Error(codes.Unavailable, "rate limit store unavailable")
		}
		s.failOpen(c, resp)
		return resp, nil
	}
	ser, blocked := st.series[d], s.unknownBlocked
	if ser != nil {
		blocked = ser.blocked
	}
	s.respond(c, resp, ser, blocked)
	return resp, nil
}

// logStoreError logs a store failure at most once a second, saying how many
// were not logged since.
func (s *Server) logStoreError(domain string, err error) {
	now := time.Now().UnixNano()
	last := s.lastErrLog.Load()
	if now-last < int64(time.Second) || !s.lastErrLog.CompareAndSwap(last, now) {
		s.errsSkipped.Add(1)
		return
	}
	answer := "OK (fail open)"
	if s.failClosed {
		answer = "UNAVAILABLE (fail closed)"
	}
	s.log.Error("envoy rate limit store failed", logAnswer, answer, logDomain, domain, logError, err,
		logUnlogged, s.errsSkipped.Swap(0))
}
