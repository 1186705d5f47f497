package main

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/limits"
)

// startEnvoy loads --envoy-config (a bad file stops serve, naming the
// file), builds the Envoy rate limit service on the node's shared counter
// store and the rate limit rules' blocks, and starts watching the file or
// folder. Without --envoy-config the service still answers, OK with no
// limit for every domain, except for blocked descriptor entries.
func (n *node) startEnvoy(ctx context.Context, limitRules *limits.Rules) (*envoyrls.Server, error) {
	file := n.cfg.EnvoyConfig
	var rules *envoyrls.Config
	if file != "" {
		var err error
		if rules, err = envoyrls.Load(file); err != nil {
			return nil, fmt.Errorf("--envoy-config: %w", err)
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
			return nil, fmt.Errorf("--auth-failures-per-minute: %w", err)
		}
		opts.AuthFailures = lim
		if count, err := n.db.CountActiveAPIKeys(ctx); err == nil && count == 0 {
			n.log.Warn("--grpc-require-key with no API key stored: every ShouldRateLimit call is refused until one with the ratelimit:check scope exists (`sluice keys create --scope ratelimit:check`)")
		}
	}
	srv, err := envoyrls.New(rules, opts)
	if err != nil {
		return nil, err
	}
	n.envoySync.Store(srv) // its sync: local rules, for the LocalSync store
	if file != "" {
		w := envoyrls.NewWatcher(srv, file)
		n.goBackground(ctx, "envoy config watcher", func(ctx context.Context) error { return w.Run(ctx, 0) })
		n.log.Info("envoy rate limit config loaded", "file", file, "domains", rules.Domains())
	}
	return srv, nil
}
