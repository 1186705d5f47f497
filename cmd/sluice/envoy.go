package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/ratelimit"
)

// envoyService is the Envoy rate limit service and its config watcher.
type envoyService struct {
	server *envoyrls.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startEnvoy loads --envoy-config (a bad file stops serve, naming the
// file), builds the service on the node's shared counter store, and starts
// watching the file or folder. Without --envoy-config the service still
// answers, OK with no limit for every domain. Stop it with stop.
func startEnvoy(ctx context.Context, cfg config.Config, log *slog.Logger, store ratelimit.Store, reg prometheus.Registerer) (*envoyService, error) {
	var rules *envoyrls.Config
	if cfg.EnvoyConfig != "" {
		var err error
		if rules, err = envoyrls.Load(cfg.EnvoyConfig); err != nil {
			return nil, fmt.Errorf("--envoy-config: %w", err)
		}
	}
	srv, err := envoyrls.New(rules, envoyrls.Options{Store: store, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	e := &envoyService{server: srv, cancel: func() {}}
	if cfg.EnvoyConfig != "" {
		w := envoyrls.NewWatcher(srv, cfg.EnvoyConfig)
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		e.cancel = cancel
		e.wg.Go(func() { _ = w.Run(runCtx, 0) })
		log.Info("envoy rate limit config loaded", "file", cfg.EnvoyConfig, "domains", rules.Domains())
	}
	return e, nil
}

// stop ends the watcher and waits for it.
func (e *envoyService) stop() {
	e.cancel()
	e.wg.Wait()
}
