package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/internal/rlqs"
	"github.com/sluicehq/sluice/internal/rlqs/redisdemand"
)

// startEnvoy loads --envoy-config (a bad file stops serve, naming the
// file), builds the Envoy rate limit service on the node's shared counter
// store and the rate limit rules' blocks, and starts watching the file or
// folder. Without --envoy-config the service still answers, OK with no
// limit for every domain, except for blocked descriptor entries. The rate
// limit quota service (RLQS) reads the same rules, sharing its Envoys'
// demand through Redis when the node has it.
func (n *node) startEnvoy(ctx context.Context, limitRules *limits.Rules) (*envoyrls.Server, *rlqs.Server, error) {
	file := n.cfg.EnvoyConfig
	var rules *envoyrls.Config
	if file != "" {
		var err error
		if rules, err = envoyrls.Load(file); err != nil {
			return nil, nil, fmt.Errorf("--envoy-config: %w", err)
		}
	}
	opts := envoyrls.Options{Store: n.counters, Logger: n.log, Registerer: n.reg,
		Blocked: limitRules.EntryBlocked, DetailedMetricValues: n.cfg.EnvoyDetailed}
	if n.cfg.GRPCRequireKey {
		opts.Keys = n.db // ShouldRateLimit needs a ratelimit:check key (docs/security.md)
		// Failed keys count against --auth-failures-per-minute, in the HTTP
		// API's budget of the same client address (security.go).
		lim, err := n.authFailureLimiter()
		if err != nil {
			return nil, nil, fmt.Errorf("--auth-failures-per-minute: %w", err)
		}
		opts.AuthFailures = lim
		if count, err := n.db.CountActiveAPIKeys(ctx); err == nil && count == 0 {
			n.log.Warn("--grpc-require-key with no API key stored: every ShouldRateLimit call is refused until one with the ratelimit:check scope exists (`sluice keys create --scope ratelimit:check`)")
		}
	}
	// The quota service reads the same rules (reloads reach its streams at
	// once) and, with --grpc-require-key, asks for the same API keys; the
	// gRPC server starts after srv is set.
	var srv *envoyrls.Server
	quota := n.startRLQS(rules, limitRules, func(ctx context.Context) error { return srv.Authorize(ctx) })
	opts.OnConfig = quota.SetConfig
	srv, err := envoyrls.New(rules, opts)
	if err != nil {
		return nil, nil, err
	}
	n.envoySync.Store(srv) // its sync: local rules, for the LocalSync store
	if file != "" {
		w := envoyrls.NewWatcher(srv, file)
		n.goBackground(ctx, "envoy config watcher", func(ctx context.Context) error { return w.Run(ctx, 0) })
		n.log.Info("envoy rate limit config loaded", "file", file, "domains", rules.Domains())
	}
	return srv, quota, nil
}

// startRLQS builds the rate limit quota service on rules. With
// --redis-url every node writes its Envoys' demand to Redis and divides
// the same table; until Redis connects, and while it fails, each node
// divides limit / --ratelimit-nodes between its own Envoys (a report
// waits for Redis at most --ratelimit-store-timeout).
func (n *node) startRLQS(rules *envoyrls.Config, limitRules *limits.Rules, authorize func(context.Context) error) *rlqs.Server {
	q := n.cfg.RLQS
	opts := rlqs.Options{Nodes: n.cfg.Ratelimit.Nodes, DemandTimeout: n.cfg.Ratelimit.StoreTimeout, DenyUnmatched: q.Unmatched == "deny",
		MaxStreams: q.MaxStreams, MaxStreamsPerClient: q.MaxStreamsPerClient, MaxBuckets: q.MaxBucketsPerStream,
		MaxBucketsPerClient: q.MaxBucketsPerClient, MaxBucketsPerNode: q.MaxBuckets, MaxReportsPerSecond: q.MaxReportsPerSecond,
		MaxRequestsPerSecond: q.MaxRequestsPerSecond, FirstReportTimeout: q.FirstReportTimeout,
		Blocked: limitRules.EntryBlocked, Authorize: authorize, Logger: n.log, Registerer: n.reg}
	if n.cfg.GRPCRequireKey {
		opts.ClientID = rlqs.KeyClient // a client is its API key (checked by authorize first)
	}
	if n.redis != nil {
		d := &lateDemand{}
		n.redis.OnConnect(func(client rueidis.Client) { d.p.Store(redisdemand.New(client, "sluice:")) })
		opts.Demand = d
	}
	return rlqs.New(rules, opts)
}

// lateDemand is the quota service's demand table on the node's Redis.
// Before Redis connects, reports fail over to the node's own table.
type lateDemand struct{ late[redisdemand.Store] }

func (l *lateDemand) Report(ctx context.Context, now time.Time, updates []rlqs.Update) ([][]rlqs.Demand, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return s.Report(ctx, now, updates)
}

func (l *lateDemand) Leave(ctx context.Context, bucket, client string) error {
	s, err := l.get()
	if err != nil {
		return err
	}
	return s.Leave(ctx, bucket, client)
}

var _ rlqs.DemandStore = (*lateDemand)(nil)
