package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/sluicehq/sluice/internal/config"
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
// and workers within cfg.ShutdownTimeout. ready, when not nil, is told the
// bound addresses once the node serves.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, ready listening) error {
	n, err := newNode(ctx, cfg, log)
	if err != nil {
		return err
	}
	n.serving = ready
	return n.Run(ctx)
}
