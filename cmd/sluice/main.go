// Command sluice is one binary for rate limiting, notifications and short
// links: `sluice serve` runs the whole service; the other commands manage it
// (migrate, keys) or talk to a running server.
//
// It is the only package that imports everything: it parses the
// configuration, builds the adapters (record store, queue, Redis, providers,
// HTTP and gRPC servers) and wires them to the domain services of
// internal/limits, internal/notify and internal/shorten.
//
// # Output
//
// Every client command prints its answer one of two ways (cmd_output.go):
// with --json, the API's JSON answer as the server sent it (one document
// on stdout; a command whose call answers no body, a delete, prints a
// small document naming what it did), and otherwise a readable table or
// line. Errors go to stderr (run prints them). clientFlags registers
// --json; its value, an *answer, also keeps the body of the last answer
// the command's client received, so --json prints the server's document,
// not the client package's reading of it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice/internal/config"
)

// command is one subcommand: its one-line summary and its body, or for a
// group of verbs (keys create|list|revoke) the verbs.
type command struct {
	summary string
	run     func(ctx context.Context, env *environment, args []string) error
	subs    map[string]subcommand
}

// environment is what a command may touch of the outside world, so tests
// can run commands in-process.
type environment struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

// commands is the command table: every command of the binary, by name,
// with its subcommands; each command's flags are those its flag set
// registers (commandFlags reads them). Dispatch (run), help (usage,
// groupUsage), shell completion (cmd_completion.go) and the README's check
// all read it. The node's wiring is in the node*.go files, the commands'
// bodies in cmd_*.go. It is set in init: completion reads it.
var commands map[string]command

func init() {
	commands = map[string]command{
		// The node, and what runs beside it on the node's host.
		"serve":       {summary: "run the HTTP API, gRPC rate limit service and workers", run: runServe},
		"migrate":     {summary: "apply pending database migrations and exit", run: runMigrate},
		"keys":        {summary: "manage API keys in the node's database", subs: keySubcommands},
		"healthcheck": {summary: "exit 0 when the local node is ready (GET /readyz), for container health checks", run: runHealthcheck},
		"version":     {summary: "print the version, VCS revision and Go version of this build (also --version)", run: runVersion},
		"bench":       {summary: "drive load at a server (or an in-process node) and print latency figures", run: runBench},
		"completion":  {summary: "print a shell completion script", subs: completionSubcommands},
		// Clients of a running server (--server, --api-key, --json).
		"check":         {summary: "check and consume a rate limit key on a running server", run: runCheck},
		"send":          {summary: "send one notification: send --user u1 --type otp --data code=123456", run: runSend},
		"campaign":      {summary: "send a notification to every user of a CSV, with a progress bar", subs: campaignSubcommands},
		"notifications": {summary: "follow or cancel notifications on a running server", subs: notificationSubcommands},
		"templates":     {summary: "list, read, replace and reset notification templates on a running server", subs: templateSubcommands},
		"dead-letters":  {summary: "list and replay deliveries that failed for good on a running server", subs: deadLetterSubcommands},
		"events":        {summary: "send users' events to the workflows, and manage status event subscriptions, on a running server", subs: eventSubcommands},
		"workflows":     {summary: "manage workflows and follow or cancel their runs on a running server", subs: workflowSubcommands},
		"topics":        {summary: "subscribe users to topics and list them on a running server", subs: topicSubcommands},
		"broadcasts":    {summary: "follow and cancel broadcasts to topics (campaign send --topic) on a running server", subs: broadcastSubcommands},
		"inbox":         {summary: "read and change users' in-app inboxes on a running server", subs: inboxSubcommands},
		"shorten":       {summary: "ask a running server for a short link: shorten URL", run: runShorten},
		"links":         {summary: "manage short links on a running server", subs: linkSubcommands},
		"domains":       {summary: "manage custom short domains on a running server", subs: domainSubcommands},
		"policies":      {summary: "manage rate limit policies on a running server", subs: policySubcommands},
		"blocks":        {summary: "manage the rate limiter's emergency blocks on a running server", subs: blockSubcommands},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], &environment{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}))
}

// run executes one command line and returns the process exit code.
// `sluice help CMD [SUB]` is `sluice CMD [SUB] -h`.
func run(ctx context.Context, args []string, env *environment) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if _, ok := commands[args[1]]; ok {
				return run(ctx, append(slices.Clone(args[1:]), "-h"), env)
			}
			fmt.Fprintf(env.stderr, "sluice help: unknown command %q\n\n", args[1])
			usage(env.stderr)
			return exitError
		}
		usage(env.stdout)
		if len(args) == 0 {
			return exitError
		}
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		return run(ctx, append([]string{"version"}, args[1:]...), env)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "sluice: unknown command %q\n\n", args[0])
		usage(env.stderr)
		return exitError
	}
	var err error
	if cmd.subs != nil {
		err = runGroup(ctx, env, args[0], cmd.subs, args[1:])
	} else {
		err = cmd.run(ctx, env, args[1:])
	}
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
		fmt.Fprintf(w, "  %-13s %s\n", name, summaryLine(name, commands[name]))
	}
	fmt.Fprintln(w, "  help          show this, or `sluice help <command>` for a command's flags")
	fmt.Fprintln(w, "\nEach server setting (the flags of serve, also read by migrate, keys and healthcheck) has a SLUICE_*\n"+
		"environment variable (--http-addr = SLUICE_HTTP_ADDR) and a key in the --config YAML file; the client\n"+
		"commands (check, send, shorten, ...) read SLUICE_SERVER and SLUICE_API_KEY, and take --json to print the API's\n"+
		"JSON answer instead of a table. `sluice --version` is `sluice version`.")
}

// summaryLine is a command's summary in `sluice help`: a group's ends with
// its subcommands, "links list|get|...".
func summaryLine(name string, c command) string {
	if c.subs == nil {
		return c.summary
	}
	return c.summary + ": " + name + " " + strings.Join(slices.Sorted(maps.Keys(c.subs)), "|")
}

// loadConfig registers every setting's flag on fs beside the command's
// own, parses args (flags before or after the positional ones) and builds
// the configuration over the environment and config file.
func loadConfig(env *environment, fs *flag.FlagSet, args []string) (config.Config, []string, error) {
	fs.SetOutput(env.stderr)
	flags := config.NewFlags(fs)
	rest, err := parseFlags(env.stdout, fs, args)
	if err != nil {
		return config.Config{}, nil, err
	}
	cfg, err := flags.Config(env.getenv)
	return cfg, rest, err
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
