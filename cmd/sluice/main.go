// Command sluice is one binary for rate limiting, notifications and short
// links: `sluice serve` runs the whole service; the other commands manage it
// (migrate, keys) or talk to a running server.
//
// It is the only package that imports everything: it parses the
// configuration, builds the adapters (record store, queue, Redis, providers,
// HTTP and gRPC servers) and wires them to the domain services of
// internal/limits, internal/notify and internal/shorten.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/sluicehq/sluice/internal/config"
)

// command is one subcommand: its one-line summary and its body.
type command struct {
	summary string
	run     func(ctx context.Context, env *environment, args []string) error
}

// environment is what a command may touch of the outside world, so tests
// can run commands in-process.
type environment struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

// commands is every command of the binary, by name. The node's wiring is in
// the node*.go files, the commands' bodies in cmd_*.go.
var commands = map[string]command{
	// The node, and what runs beside it on the node's host.
	"serve":       {"run the HTTP API, gRPC rate limit service and workers", runServe},
	"migrate":     {"apply pending database migrations and exit", runMigrate},
	"keys":        {"manage API keys: keys create|list|revoke", runKeys},
	"healthcheck": {"exit 0 when the local node is ready (GET /readyz), for container health checks", runHealthcheck},
	"version":     {"print the version, VCS revision and Go version of this build", runVersion},
	"bench":       {"drive load at a server (or an in-process node) and print latency figures", runBench},
	// Clients of a running server (--server, --api-key).
	"check":         {"check and consume a rate limit key on a running server", runCheck},
	"send":          {"send one notification: send --user u1 --type otp --data code=123456", runSend},
	"campaign":      {"send a notification to every user of a CSV: campaign send --type flash_sale --users users.csv", runCampaign},
	"notifications": {"follow or cancel notifications on a running server: notifications get|cancel ID", runNotifications},
	"events":        {"manage status event subscriptions on a running server: events create|list|get|delete|recover", runEvents},
	"inbox":         {"read and change users' in-app inboxes on a running server: inbox list|read|unread|archive|read-all|token|revoke-tokens", runInbox},
	"shorten":       {"ask a running server for a short link: shorten URL", runShorten},
	"links":         {"manage short links on a running server: links get|rules|stats|qr|convert", runLinks},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], &environment{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, env *environment) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if _, ok := commands[args[1]]; ok {
				return run(ctx, []string{args[1], "-h"}, env)
			}
		}
		usage(env.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "sluice: unknown command %q\n\n", args[0])
		usage(env.stderr)
		return 2
	}
	err := cmd.run(ctx, env, args[1:])
	code := exitCode(err)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(env.stderr, "sluice %s: %v\n", args[0], err)
	}
	return code
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: sluice <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-13s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "  help          show this, or `sluice help <command>` for a command's flags")
	fmt.Fprintln(w, "\nEach server setting (the flags of serve, also read by migrate, keys and healthcheck) has a SLUICE_*\n"+
		"environment variable (--http-addr = SLUICE_HTTP_ADDR) and a key in the --config YAML file; the client\n"+
		"commands (check, send, shorten, ...) read SLUICE_SERVER and SLUICE_API_KEY.")
}

// loadConfig parses a command's flags (extra ones registered by the caller
// on fs) over the environment and config file.
func loadConfig(env *environment, fs *flag.FlagSet, args []string) (config.Config, []string, error) {
	fs.SetOutput(env.stderr)
	return config.Load(fs, args, env.getenv)
}

func newLogger(w io.Writer, cfg config.Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
