package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/internal/audience"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/edge"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/gateway"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/inbox"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/internal/queue"
	"github.com/sluicehq/sluice/internal/redisconn"
	"github.com/sluicehq/sluice/internal/rlqs"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/workflow"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

// node is one Sluice process: the engines it opened, the services built on
// them and the servers that expose them. newNode builds every part and
// starts its background work; Run serves until its context ends. Each
// part registers how it stops as it starts, in one list: the node stops
// its parts once each, in the reverse of the order they started, so a
// part never outlives what it uses (the HTTP server drains before the
// notification workers stop, the workers before the queue closes, the
// queue before the database).
type node struct {
	cfg   config.Config
	log   *slog.Logger
	stops []stopper // in start order

	// The engines and what every part shares.
	db    *store.DB
	queue *queue.Conn
	redis *redisconn.Conn // nil without --redis-url; may connect after start
	quota *rlqs.Server    // the Envoy rate limit quota service, on n.grpc
	reg   *prometheus.Registry
	// panics logs and counts the panics recovered on every surface that
	// runs client input (sluice_panics_total).
	panics *panics.Reporter
	// counters is the node's rate limit counter store: memory, or Redis
	// behind failover and the hot key cache. Every limiter of the node
	// (HTTP API, gateway, Envoy RLS, link and notification limits) uses it.
	counters ratelimit.Store
	// envoySync is the Envoy rate limit service once started: its rules
	// say which "envoy:" policies sync local (node_ratelimit.go).
	envoySync atomic.Pointer[envoyrls.Server]

	// proxies are the trusted load balancers (config.Config.Proxies).
	proxies []netip.Prefix
	// proxyHeader is the one forwarding header they write (--trusted-proxy-header).
	proxyHeader httplimit.ProxyHeader

	api    http.Handler
	grpc   *grpc.Server
	health *grpcHealth
	// draining is set once shutdown starts: /readyz answers 503 from then.
	draining atomic.Bool
	gateway  *gateway.Gateway // nil without gateway.listen
	// gwTLS, if set, makes the gateway serve HTTPS.
	gwTLS *tls.Config
	// inbox is the in-app inbox; its streams end when the HTTP server shuts down.
	inbox *inbox.Service
	// live is the live link stats feed; its streams end likewise.
	live *liveLinks

	// serving, when not nil, is told the bound addresses once Run serves.
	serving listening

	// events is the status events service (cmd/sluice/node_events.go).
	events *statusEvents
	// workflows is the workflow engine (node_workflows.go).
	workflows *workflow.Service
	// audiences is topics and broadcasts (node_audiences.go).
	audiences *audience.Service
}

// stopper is how one part of the node stops. fn returns once the part has
// stopped, or once ctx (the shutdown deadline) ends.
type stopper struct {
	name string
	fn   func(ctx context.Context) error
}

// onStop records how the part just started stops.
func (n *node) onStop(name string, fn func(ctx context.Context) error) {
	n.stops = append(n.stops, stopper{name: name, fn: fn})
}

// goBackground runs fn until the node stops: its stopper cancels fn's
// context and waits for fn to return, or for the shutdown deadline. An
// error fn returns before that is logged at once.
func (n *node) goBackground(ctx context.Context, name string, fn func(ctx context.Context) error) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() {
		err := fn(runCtx)
		if err != nil && runCtx.Err() == nil {
			n.log.Error("stopped", "part", name, "error", err)
		}
		done <- err
	}()
	n.onStop(name, func(ctx context.Context) error {
		cancel()
		select {
		case err := <-done:
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("still running at the shutdown deadline: %w", ctx.Err())
		}
	})
}

// stop stops every part started so far, last started first, within the
// drain delay plus the shutdown timeout, and forgets them.
func (n *node) stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.DrainDelay+n.cfg.ShutdownTimeout)
	defer cancel()
	for i := len(n.stops) - 1; i >= 0; i-- {
		s := n.stops[i]
		if err := s.fn(ctx); err != nil {
			n.log.Warn("stop", "part", s.name, "error", err)
		}
	}
	n.stops = nil
}

// newNode opens the engines cfg names, builds the services on them and
// starts their background work. When a part fails, the parts already
// started are stopped before it returns.
func newNode(ctx context.Context, cfg config.Config, log *slog.Logger) (_ *node, err error) {
	n := &node{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			n.stop(ctx)
		}
	}()

	checks, err := n.openEngines(ctx)
	if err != nil {
		return nil, err
	}
	n.newRegistry()

	limiter, err := n.startRatelimit(ctx)
	if err != nil {
		return nil, err
	}
	envoy, quota, err := n.startEnvoy(ctx, limiter.Rules())
	n.quota = quota
	if err != nil {
		return nil, err
	}
	n.events = n.newStatusEvents()
	if n.live, err = n.startLinkLive(ctx); err != nil {
		return nil, err
	}
	links, err := n.startLinks(ctx)
	if err != nil {
		return nil, fmt.Errorf("links: %w", err)
	}
	if n.inbox, err = n.startInbox(ctx); err != nil {
		return nil, fmt.Errorf("inbox: %w", err)
	}
	notifier, providersReady, err := n.startNotify(ctx, smsLinks{links})
	if err != nil {
		return nil, fmt.Errorf("notifications: %w", err)
	}
	if providersReady != nil {
		checks = append(checks, *providersReady)
	}

	n.workflows = n.startWorkflows(ctx, notifier)                          // node_workflows.go
	n.audiences = n.startAudiences(ctx, notifier)                          // node_audiences.go
	if err = n.newAPI(ctx, checks, limiter, links, notifier); err != nil { // node_api.go
		return nil, err
	}
	if err = n.newGRPC([]grpcService{envoy, quota}); err != nil {
		return nil, err
	}
	if err = n.newGateway(limiter); err != nil {
		return nil, err
	}
	return n, nil
}

// openEngines takes the data dir, opens the database and the queue and,
// with --redis-url, connects Redis, and returns the readiness checks of
// those it opened.
func (n *node) openEngines(ctx context.Context) ([]httpapi.Check, error) {
	cfg, log := n.cfg, n.log
	// One data dir, one node: taken before SQLite or the embedded NATS
	// store opens, released last.
	if usesDataDir(cfg) {
		release, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		n.onStop("data dir lock", func(context.Context) error { return release() })
	}
	var err error
	if n.db, err = openStore(ctx, cfg, log); err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	n.onStop("database", func(context.Context) error { return n.db.Close() })
	log.Info("database ready", "engine", n.db.Dialect())

	n.queue, err = queue.Open(ctx, queue.Options{URL: cfg.NATSURL, DataDir: cfg.DataDir, ListenAddr: cfg.NATSListen,
		Replicas: cfg.NATSReplicas, StreamPrefix: cfg.NATSPrefix, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	n.onStop("queue", func(context.Context) error { return n.queue.Close() })
	log.Info("queue ready", "embedded", n.queue.Embedded())

	checks := []httpapi.Check{{Name: "database", Ping: n.db.Ping}, {Name: "nats", Ping: n.queue.Ping}}
	if cfg.RedisURL != "" {
		check, err := n.startRedis(ctx)
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		checks = append(checks, check)
	}
	return checks, nil
}

// newRegistry builds the node's metrics registry and the panic reporter
// that counts on it.
func (n *node) newRegistry() {
	// Every metric name starts with sluice_, the runtime's too (sluice_go_*,
	// sluice_process_*), so one prefix selects all of Sluice in a scrape.
	n.reg = metrics.NewRegistry()
	metrics.RegisterStore(n.reg, n.db.BatchStats())
	registerBuildInfo(n.reg)
	n.panics = &panics.Reporter{Logger: n.log, Count: metrics.NewPanics(n.reg)}
}

// newGRPC builds the gRPC server of services, with TLS and client
// certificates when configured (node_tls.go).
func (n *node) newGRPC(services []grpcService) error {
	grpcOpts, err := n.grpcServerOptions()
	if err != nil {
		return fmt.Errorf("grpc tls: %w", err)
	}
	n.grpc, n.health = newGRPCServer(n.panics, services, n.cfg.GRPCReflection, grpcOpts...)
	return nil
}

// newGateway builds the rate limiting reverse proxy when gateway.listen is
// set, with HTTPS from --gateway-tls-cert-file or --tls-cert-file
// (node_tls.go).
func (n *node) newGateway(limiter *limits.Service) error {
	cfg := n.cfg
	if cfg.Gateway.Listen == "" {
		return nil
	}
	gwTLS, err := n.gatewayTLS()
	if err != nil {
		return fmt.Errorf("gateway tls: %w", err)
	}
	if n.gateway, err = gateway.New(gateway.Options{Config: gatewayConfig(cfg.Gateway), TrustedProxies: n.proxies, ProxyHeader: n.proxyHeader, Limits: limiter, Keys: n.db, HTTP: cfg.HTTP.Apply, Logger: n.log,
		TLS: gwTLS, UsageUnreadable: metrics.NewGatewayUsageUnreadable(n.reg)}); err != nil {
		return err
	}
	n.gwTLS = gwTLS
	return nil
}

// Run listens on the node's addresses and serves HTTP, gRPC and (when
// configured) the gateway until ctx ends or a listener fails, then stops
// every part of the node, draining in-flight requests and jobs within
// cfg.ShutdownTimeout. Run is called once.
func (n *node) Run(ctx context.Context) error {
	defer n.stop(ctx)
	errc := make(chan error, 2)
	httpAddr, err := n.serveHTTP(errc)
	if err != nil {
		return err
	}
	grpcAddr, err := n.serveGRPC(errc)
	if err != nil {
		return err
	}
	gatewayAddr, err := n.serveGateway()
	if err != nil {
		return err
	}
	// Added last so it runs first: /readyz answers 503 and gRPC health
	// NOT_SERVING for --drain-delay while the servers still serve, so load
	// balancers stop sending before the listeners close.
	n.onStop("drain", n.drain)

	n.log.Info("sluice serving", "http", httpAddr, "grpc", grpcAddr, "version", buildVersion(),
		"grpc_services", grpcServices(n.grpc), "grpc_reflection", n.cfg.GRPCReflection)
	if n.serving != nil {
		n.serving(bound{HTTP: httpAddr, GRPC: grpcAddr, Gateway: gatewayAddr})
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		n.log.Error("listener failed", "error", serveErr)
	}
	n.log.Info("shutting down: draining in-flight requests", "drain_delay", n.cfg.DrainDelay, "timeout", n.cfg.ShutdownTimeout)
	n.stop(ctx)
	n.log.Info("stopped")
	return serveErr
}

// serveHTTP listens on cfg.HTTPAddr and serves the API there.
func (n *node) serveHTTP(errc chan<- error) (addr string, err error) {
	ln, err := n.listen(n.cfg.HTTPAddr)
	if err != nil {
		return "", fmt.Errorf("http listen: %w", err)
	}
	if ln, err = n.httpTLS(ln); err != nil { // with --tls-cert-file (node_tls.go)
		return "", fmt.Errorf("http tls: %w", err)
	}
	hs := &http.Server{
		Handler:     n.drainingReadyz(n.api),
		ConnContext: connContext, // the TCP peer, for the keyless check and the access log
		ErrorLog:    slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
	n.cfg.HTTP.Apply(hs) // slow clients are cut off; inbox streams lift the write timeout for themselves
	// Open inbox streams would hold Shutdown until its deadline: end them.
	hs.RegisterOnShutdown(n.inbox.Close)
	hs.RegisterOnShutdown(n.live.hub.Close)
	go func() {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	n.onStop("http server", hs.Shutdown)
	return ln.Addr().String(), nil
}

// listen listens on addr for HTTP, the API's or the gateway's: with
// --proxy-protocol, connections may start with a PROXY header, from the
// trusted proxies only when they are listed (edge.Listen).
func (n *node) listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || !n.cfg.ProxyProtocol {
		return ln, err
	}
	return edge.Listen(ln, n.proxies), nil
}

// serveGRPC listens on cfg.GRPCAddr and serves Envoy RLS and health there.
func (n *node) serveGRPC(errc chan<- error) (addr string, err error) {
	ln, err := net.Listen("tcp", n.cfg.GRPCAddr)
	if err != nil {
		return "", fmt.Errorf("grpc listen: %w", err)
	}
	go func() {
		if err := n.grpc.Serve(ln); err != nil {
			errc <- err
		}
	}()
	n.onStop("grpc server", func(ctx context.Context) error {
		n.quota.Close() // its streams never end by themselves
		stopGRPC(ctx, n.grpc, n.health)
		return nil
	})
	return ln.Addr().String(), nil
}

// serveGateway runs the rate limiting reverse proxy when gateway.listen is
// set, until the node stops, and returns the address it listens on. A
// gateway that fails is logged; the rest of the node goes on serving. It
// serves as gateway.Gateway.Serve does (HTTPS with the gateway's
// certificate, the listener limits against slow clients), with the
// gateway's panics recovered: the request gets a 500, the panic is
// logged and counted on the "gateway" surface.
func (n *node) serveGateway() (addr string, err error) {
	if n.gateway == nil {
		return "", nil
	}
	ln, err := n.listen(n.cfg.Gateway.Listen)
	if err != nil {
		return "", fmt.Errorf("gateway listen: %w", err)
	}
	addr = ln.Addr().String()
	if n.gwTLS != nil {
		ln = tls.NewListener(ln, n.gwTLS) // the handshake runs on the first read, after a PROXY header
	}
	n.log.Info("gateway serving", "listen", addr, "upstream", n.cfg.Gateway.Upstream)
	hs := &http.Server{
		Handler:  n.panics.Handler(panics.Gateway, n.gateway, internalError),
		ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
	n.cfg.HTTP.Apply(hs) // streaming routes lift the timeouts for themselves
	go func() {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("gateway stopped", "error", err)
		}
	}()
	n.onStop("gateway", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, n.cfg.ShutdownTimeout)
		defer cancel()
		return hs.Shutdown(ctx)
	})
	return addr, nil
}

// internalError answers 500 problem+json: a request whose handler
// panicked before it wrote anything.
func internalError(w http.ResponseWriter, r *http.Request) {
	httpapi.WriteProblem(w, r, httpapi.NewProblem(http.StatusInternalServerError, "internal-error", "",
		"internal error; the server log has the details"))
}

// drain marks the node as stopping (/readyz 503, every gRPC health service
// NOT_SERVING) and keeps serving for --drain-delay, or until ctx ends.
func (n *node) drain(ctx context.Context) error {
	n.draining.Store(true)
	n.health.drain()
	if n.cfg.DrainDelay <= 0 {
		return nil
	}
	n.log.Info("draining: reporting not ready before the listeners close", "drain_delay", n.cfg.DrainDelay)
	t := time.NewTimer(n.cfg.DrainDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// drainingReadyz answers GET /readyz with 503 once the node drains; every
// other request goes on to next.
func (n *node) drainingReadyz(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.draining.Load() && r.URL.Path == "/readyz" {
			w.Header().Set("Retry-After", "1")
			httpapi.WriteProblem(w, r, httpapi.NewProblem(http.StatusServiceUnavailable, "not-ready", "Not ready",
				"not ready: the node is shutting down"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
