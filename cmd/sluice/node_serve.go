package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/sluicehq/sluice/internal/config"
)

func runServe(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	setUsage(fs, "serve [flags]", "Runs one Sluice node: the HTTP API, the gRPC rate limit service, the notification workers, the\n"+
		"shortener's redirects and the dashboard. Every flag has a SLUICE_* environment variable and a\n"+
		"key in the --config YAML file (docs/configuration.md).")
	cfg, rest, err := loadConfig(env, fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		fs.Usage()
		return fmt.Errorf("want no arguments, not %q", rest[0])
	}
	return serve(ctx, cfg, newLogger(env.stderr, cfg), nil)
}

// bound is where a node listens, as bound: ports chosen with ":0" filled in.
// Gateway is empty when the node runs no gateway.
type bound struct{ HTTP, GRPC, Gateway string }

// listening is told the bound addresses once the node serves; tests use it
// to find ports chosen with ":0".
type listening func(bound)

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
