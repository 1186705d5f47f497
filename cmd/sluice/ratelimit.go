package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/announce"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/queue"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// rateLimiting is the node's rate limit service and the goroutines that
// keep it current.
type rateLimiting struct {
	// store is the node's shared counter store: memory, or Redis behind
	// failover and the hot key cache. Every rate limiter of the node (HTTP
	// API, gateway, Envoy RLS) uses it.
	store    ratelimit.Store
	rules    *limits.Rules
	service  *limits.Service
	failover *limits.Failover // nil without Redis
	metrics  *limits.Metrics

	stopListen func() error
	wg         sync.WaitGroup
	cancel     context.CancelFunc
}

// startRatelimit loads the rules, builds the store and the service, and
// starts the rules retriever, the change listener and the Redis prober.
// rc is nil when counters stay in memory. Stop it with stop.
func startRatelimit(ctx context.Context, cfg config.Config, log *slog.Logger, db *store.DB, q *queue.Conn,
	rc rueidis.Client, reg prometheus.Registerer) (*rateLimiting, error) {
	rl := &rateLimiting{metrics: metrics.NewLimits(reg)}
	rules, err := limits.NewRules(limits.RulesOptions{Store: db, Config: cfg.Ratelimit.Policies,
		Refresh: cfg.Ratelimit.RefreshInterval, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("rate limit rules: %w", err)
	}
	if err := rules.Load(ctx); err != nil {
		return nil, fmt.Errorf("rate limit rules: %w", err)
	}
	rl.rules = rules

	if rc == nil {
		rl.store = ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
	} else {
		redis, err := redisstore.New(rc, redisstore.Options{Timeout: cfg.Ratelimit.StoreTimeout})
		if err != nil {
			return nil, fmt.Errorf("redis rate limit store: %w", err)
		}
		rl.failover = limits.NewFailover(limits.FailoverOptions{Primary: redis, Nodes: cfg.Ratelimit.Nodes,
			FailsClosed: rules.FailsClosed, Timeout: cfg.Ratelimit.StoreTimeout, Metrics: rl.metrics, Logger: log})
		rl.store = rl.failover
		if cfg.Ratelimit.HotKeys > 0 {
			rl.store = limits.NewHotKeys(rl.failover, cfg.Ratelimit.HotKeys, nil)
		}
	}

	bus := announce.New(q.NATS(), q.Name("ratelimit.rules.changed"))
	rl.stopListen, err = bus.Listen(func(string) { rules.Invalidate() })
	if err != nil {
		return nil, err
	}
	rl.service, err = limits.NewService(limits.Options{Rules: rules, Counters: rl.store, Announce: bus.Signal,
		Metrics: rl.metrics, Logger: log})
	if err != nil {
		_ = rl.stopListen()
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rl.cancel = cancel
	rl.wg.Go(func() { _ = rules.Run(runCtx) })
	if rl.failover != nil {
		rl.wg.Go(func() { _ = rl.failover.Run(runCtx) })
	}
	return rl, nil
}

// stop ends the listener and the background goroutines and waits for them.
func (rl *rateLimiting) stop() {
	_ = rl.stopListen()
	rl.cancel()
	rl.wg.Wait()
}
