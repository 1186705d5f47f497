package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/queue"
	"github.com/sluicehq/sluice/internal/store"
)

func runServe(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, _, err := loadConfig(env, fs, args)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, newLogger(env.stderr, cfg), nil)
}

// listening is told the bound addresses once the node serves; tests use it
// to find ports chosen with ":0".
type listening func(httpAddr, grpcAddr string)

// serve runs one Sluice node until ctx ends, then drains in-flight requests
// and workers within cfg.ShutdownTimeout.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, ready listening) error {
	db, err := openStore(ctx, cfg, log)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	log.Info("database ready", "engine", db.Dialect())

	q, err := queue.Open(ctx, queue.Options{URL: cfg.NATSURL, DataDir: cfg.DataDir, ListenAddr: cfg.NATSListen,
		StreamPrefix: cfg.NATSPrefix, Logger: log})
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer q.Close()
	log.Info("queue ready", "embedded", q.Embedded())

	checks := []httpapi.Check{{Name: "database", Ping: db.Ping}, {Name: "nats", Ping: q.Ping}}
	var rc rueidis.Client
	if cfg.RedisURL != "" {
		rc, err = openRedis(cfg.RedisURL)
		if err != nil {
			return fmt.Errorf("redis: %w", err)
		}
		defer rc.Close()
		checks = append(checks, httpapi.Check{Name: "redis", Ping: func(ctx context.Context) error {
			return rc.Do(ctx, rc.B().Ping().Build()).Error()
		}})
		log.Info("redis ready")
	}

	// Every metric name starts with sluice_, the runtime's too (sluice_go_*,
	// sluice_process_*), so one prefix selects all of Sluice in a scrape.
	reg := prometheus.NewRegistry()
	prometheus.WrapRegistererWithPrefix("sluice_", reg).MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)
	registerStoreMetrics(reg, db.BatchStats())

	rl, err := startRatelimit(ctx, cfg, log, db, q, rc, reg)
	if err != nil {
		return err
	}
	defer rl.stop()
	envoy, err := startEnvoy(ctx, cfg, log, rl.store, reg)
	if err != nil {
		return err
	}
	defer envoy.stop()
	// rlStore is the node's shared rate limit counter store (memory, or
	// Redis behind failover); every rate limiter of the node uses it.
	rlStore := rl.store
	links, stopLinkListen, err := newLinks(ctx, cfg, db, q, rc, rlStore, reg, log)
	if err != nil {
		return fmt.Errorf("links: %w", err)
	}
	defer func() { _ = stopLinkListen() }() // before the NATS connection closes (deferred above)
	// The click flusher and purge job stop after the HTTP server has
	// drained (no more hits) and before the database closes (deferred
	// above), with a last flush.
	linksCtx, stopLinks := context.WithCancel(context.WithoutCancel(ctx))
	linksDone := make(chan error, 1)
	go func() { linksDone <- links.Run(linksCtx) }()
	defer func() {
		stopLinks()
		if err := <-linksDone; err != nil {
			log.Warn("link click flusher", "error", err)
		}
	}()
	notifier, err := startNotify(ctx, cfg, log, reg, db, q, rc, rlStore, notifyDeps{links: smsLinks{links}})
	if err != nil {
		return fmt.Errorf("notifications: %w", err)
	}
	defer func() { // on early returns; a no-op after the stop below
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		notifier.stop(sctx)
	}()
	if len(notifier.providers.guards) > 0 {
		// Breaker states inform /readyz without failing it: a provider
		// that is down is failed over or waited out, the node still works.
		checks = append(checks, httpapi.Check{Name: "providers", Ping: func(context.Context) error { return nil },
			Detail: notifier.providers.breakerStates})
	}

	ui, err := uiOptions(ctx, cfg, db)
	if err != nil {
		return err
	}
	api := httpapi.New(httpapi.Options{
		Logger:       log,
		Registry:     reg,
		Keys:         db,
		Checks:       checks,
		MaxBodyBytes: cfg.MaxBodyBytes,
		Version:      buildVersion(),
		Ratelimit:    rl.service,
		Links:        links,
		UI:           ui,
		Notify:       notifier.svc,
		Preferences:  preferences{notifier.svc},
	})
	if n, err := db.CountActiveAPIKeys(ctx); err == nil && n == 0 {
		log.Warn("no API keys configured: only loopback clients are served; create one with `sluice keys create --scope admin`")
	}

	httpLn, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("http listen: %w", err)
	}
	grpcLn, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		httpLn.Close()
		return fmt.Errorf("grpc listen: %w", err)
	}
	hs := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	gs := grpc.NewServer()
	healthSrv := health.NewServer()
	healthpb.RegisterHealthServer(gs, healthSrv)
	envoy.server.Register(gs)

	gwCtx, stopGateway := context.WithCancel(ctx)
	defer stopGateway()
	gwDone, err := startGateway(gwCtx, cfg, log, rl.service)
	if err != nil {
		httpLn.Close()
		grpcLn.Close()
		return err
	}

	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(httpLn) }()
	go func() { errc <- gs.Serve(grpcLn) }()
	log.Info("sluice serving", "http", httpLn.Addr().String(), "grpc", grpcLn.Addr().String(), "version", buildVersion())
	if ready != nil {
		ready(httpLn.Addr().String(), grpcLn.Addr().String())
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		log.Error("listener failed", "error", serveErr)
	}
	log.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout)
	healthSrv.Shutdown()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "error", err)
	}
	stopGRPC(sctx, gs)
	stopGateway()
	<-gwDone
	// Workers stop before the deferred closes of the queue and the database.
	notifier.stop(sctx)
	log.Info("stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// stopGRPC drains gRPC calls, or cuts them when ctx ends first.
func stopGRPC(ctx context.Context, gs *grpc.Server) {
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		gs.Stop()
		<-done
	}
}

// openRedis connects to Redis or Valkey, standalone or Cluster, from a URL.
func openRedis(url string) (rueidis.Client, error) {
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	opt.DisableCache = true
	return rueidis.NewClient(opt)
}

// registerStoreMetrics exports the group commit counters: writes per
// commit and how busy the writer is say whether the database is what
// limits the notification pipeline.
func registerStoreMetrics(reg prometheus.Registerer, st *store.BatchStats) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_store_commits_total",
			Help: "Group-committed transactions."},
			func() float64 { b, _, _ := st.Snapshot(); return float64(b) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_store_committed_writes_total",
			Help: "Writes (one caller's rows each) carried by group-committed transactions."},
			func() float64 { _, o, _ := st.Snapshot(); return float64(o) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_store_commit_busy_seconds_total",
			Help: "Time the group commit writers spent running and committing transactions."},
			func() float64 { return st.BusyTime().Seconds() }),
	)
}
