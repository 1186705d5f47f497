package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/announce"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// startRatelimit loads the rules, builds the node's counter store
// (n.counters: memory, or Redis behind failover and the hot key cache) and
// the rate limit service, and starts the rules retriever, the change
// listener and the Redis prober.
func (n *node) startRatelimit(ctx context.Context) (*limits.Service, error) {
	cfg := n.cfg.Ratelimit
	hooks := metrics.NewLimits(n.reg)
	rules, err := limits.NewRules(limits.RulesOptions{Store: n.db, Config: cfg.Policies,
		Refresh: cfg.RefreshInterval, Logger: n.log})
	if err != nil {
		return nil, fmt.Errorf("rate limit rules: %w", err)
	}
	if err := rules.Load(ctx); err != nil {
		return nil, fmt.Errorf("rate limit rules: %w", err)
	}
	n.goBackground(ctx, "rate limit rules retriever", rules.Run)

	n.counters = ratelimit.NewMemoryStore(ratelimit.MemoryOptions{MaxHolds: cfg.MaxNodeHolds})
	if n.redis != nil {
		// Down, deciding locally, until Redis connects: at once when it
		// answered at start, else when the connector reaches it.
		failover := limits.NewFailover(limits.FailoverOptions{Nodes: cfg.Nodes,
			FailsClosed: rules.FailsClosed, Timeout: cfg.StoreTimeout, Metrics: hooks, Logger: n.log, MaxHolds: cfg.MaxNodeHolds})
		n.redis.OnConnect(func(client rueidis.Client) {
			redis, err := redisstore.New(client, redisstore.Options{Timeout: cfg.StoreTimeout})
			if err != nil { // only for a bad key prefix, and the default is not
				n.log.Error("redis rate limit store", "error", err)
				return
			}
			failover.SetPrimary(redis)
		})
		n.goBackground(ctx, "redis prober", failover.Run)
		n.counters = failover
		if cfg.HotKeys > 0 {
			n.counters = limits.NewHotKeys(failover, cfg.HotKeys, nil)
		}
		// Policies with "sync": "local" decide from this node's share and
		// sync every interval; the others pass through.
		local := limits.NewLocalSync(n.counters, limits.LocalSyncOptions{Interval: n.syncInterval(rules),
			Nodes: cfg.Nodes, Logger: n.log, Metrics: hooks})
		n.goBackground(ctx, "rate limit local sync", local.Run)
		n.counters = local
	}

	ann := announce.NewRatelimit(n.queue.NATS(), n.queue.Name)
	svc, err := limits.NewService(limits.Options{Rules: rules, Counters: n.counters, Announce: ann.Announce,
		Metrics: hooks, Logger: n.log, MaxHolds: cfg.MaxHolds, MaxOwnerHolds: cfg.MaxAPIKeyHolds,
		MaxBlocks: cfg.MaxBlocks})
	if err != nil {
		return nil, err
	}
	stopListen, err := ann.Listen(panics.Func(n.panics, panics.Announce, svc.Heard))
	if err != nil {
		return nil, err
	}
	n.onStop("rate limit announcement listener", func(context.Context) error { return stopListen() })
	return svc, nil
}

// syncInterval is LocalSync's Interval: named HTTP policies ask rules,
// Envoy rules (policy names "envoy:...") the Envoy service in force.
func (n *node) syncInterval(rules *limits.Rules) func(policy string) time.Duration {
	return func(policy string) time.Duration {
		if strings.HasPrefix(policy, envoyrls.PolicyPrefix) {
			if srv := n.envoySync.Load(); srv != nil {
				return srv.SyncInterval(policy)
			}
			return 0
		}
		return rules.SyncInterval(policy)
	}
}
