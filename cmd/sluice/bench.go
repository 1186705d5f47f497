package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/config"
)

// benchScenario is one load `sluice bench` can drive. run returns a row per
// target it drove (Sluice, then the --compare target when it applies).
type benchScenario struct {
	name, summary string
	run           func(ctx context.Context, b *benchRun) ([]bench.Result, error)
	// notDefault scenarios run only when named.
	notDefault bool
}

// benchScenarios in the order they run and print.
var benchScenarios = []benchScenario{
	{name: "check-http", summary: "POST /v1/ratelimit/check, one key per request spread over --keys keys", run: benchCheckHTTP},
	{name: "check-grpc", summary: "Envoy RLS ShouldRateLimit through the generated client", run: benchCheckGRPC},
	{name: "redirect", summary: "GET /{code} over --links links made first", run: benchRedirect},
	{name: "notify", summary: "POST /v1/notifications (accept rate), then the time until all are sent to the outbox", run: benchNotify},
	{name: "campaign", summary: "--campaign marketing notifications in batches while an OTP is sent every 10ms: OTP latency", run: benchCampaign},
}

// benchRun is one `sluice bench` invocation's settings and targets.
type benchRun struct {
	opts       bench.Options
	server     string // Sluice's HTTP base URL
	grpcAddr   string // Sluice's gRPC address; empty when unknown
	apiKey     string
	keys       int
	policy     string // empty: create benchPolicy
	domain     string
	descriptor string
	perCall    int
	links      int
	campaign   int
	notifyMix  string // all or seeds; see benchNotify
	// drainTimeout bounds the wait for notifications to be delivered.
	drainTimeout time.Duration
	compareHTTP  string // another implementation's HTTP endpoint
	compareGRPC  string // another implementation's Envoy RLS address
	hc           *http.Client
	c            *client.Client
	log          io.Writer
}

const (
	benchPolicy = "sluice-bench"
	benchDomain = "sluice-bench"
	// benchLimit is high enough that a benchmark measures admitted checks.
	benchLimit = 1_000_000_000
)

// runBench is `sluice bench [flags] [SCENARIO...]`.
func runBench(ctx context.Context, env *environment, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	b := &benchRun{log: env.stderr}
	server := fs.String("server", "", "Sluice server URL to load; empty starts a node in this process")
	fs.StringVar(&b.grpcAddr, "grpc-server", "", "gRPC address of --server for check-grpc (host:port)")
	apiKey := fs.String("api-key", "", "API key for --server (default $SLUICE_API_KEY); admin scope lets bench create its policy and links")
	redisURL := fs.String("redis-url", "", "in-process node only: keep counters in this Redis (use a private one)")
	databaseURL := fs.String("database-url", "", "in-process node only: PostgreSQL URL instead of SQLite in a temp dir")
	natsURL := fs.String("nats-url", "", "in-process node only: external NATS instead of the embedded one")
	fs.IntVar(&b.opts.Workers, "workers", 64, "requests in flight at once (closed loop)")
	fs.DurationVar(&b.opts.Duration, "duration", 5*time.Second, "how long each scenario runs on each target (with --requests: only if given)")
	fs.Int64Var(&b.opts.Requests, "requests", 0, "stop each run after this many requests (0: only --duration bounds it)")
	fs.IntVar(&b.keys, "keys", 1024, "distinct rate limit keys the checks spread over")
	fs.StringVar(&b.policy, "policy", "", "policy for check-http (default: bench creates "+benchPolicy+", a limit too high to refuse)")
	fs.StringVar(&b.domain, "domain", benchDomain, "Envoy domain for check-grpc")
	fs.StringVar(&b.descriptor, "descriptor", "remote_address", "Envoy descriptor key for check-grpc")
	fs.IntVar(&b.perCall, "descriptors", 1, "descriptors per ShouldRateLimit call (batching)")
	fs.IntVar(&b.links, "links", 100, "links the redirect scenario creates and spreads its GETs over")
	fs.IntVar(&b.campaign, "campaign", 10_000, "users the campaign scenario sends a marketing notification to")
	fs.StringVar(&b.notifyMix, "notify-mix", "all", "channels of the notify scenario: all (email, sms and push each) or seeds (1.75 per notification)")
	fs.DurationVar(&b.drainTimeout, "drain-timeout", 5*time.Minute, "longest wait for notifications to be delivered")
	compare := fs.String("compare", "", "also drive another implementation with the same load: an HTTP URL (plain endpoint),\n"+
		"a host:port (Envoy RLS gRPC server), or \"bare\" (an in-process handler and gRPC server that answer at once)")
	fs.Usage = func() {
		fmt.Fprintln(env.stderr, "Usage: sluice bench [flags] [SCENARIO...]\n\nDrives load at a Sluice server (or a node it starts in process) and prints one table.\nScenarios (default: all):")
		for _, s := range benchScenarios {
			fmt.Fprintf(env.stderr, "  %-11s %s\n", s.name, s.summary)
		}
		fmt.Fprintln(env.stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if b.notifyMix != "all" && b.notifyMix != "seeds" {
		return fmt.Errorf("--notify-mix %q: want all or seeds", b.notifyMix)
	}
	scenarios, err := pickScenarios(fs.Args())
	if err != nil {
		fs.Usage()
		return err
	}
	// --requests alone bounds a run by count; --duration's default applies
	// only when it is named or no count is given.
	durationSet := false
	fs.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
	if b.opts.Requests > 0 && !durationSet {
		b.opts.Duration = 0
	}
	if b.opts.Duration <= 0 && b.opts.Requests <= 0 {
		return errors.New("--duration or --requests must be positive")
	}
	b.keys, b.links, b.perCall, b.campaign = max(1, b.keys), max(1, b.links), max(1, b.perCall), max(1, b.campaign)
	b.apiKey = firstNonEmpty(*apiKey, env.getenv("SLUICE_API_KEY"))

	if *server == "" {
		n, err := startBenchNode(ctx, env, benchNodeEngines{redis: *redisURL, database: *databaseURL, nats: *natsURL})
		if err != nil {
			return fmt.Errorf("in-process node: %w", err)
		}
		defer n.stop()
		b.server, b.grpcAddr = n.httpURL, n.grpcAddr
		fmt.Fprintf(env.stderr, "bench: in-process node on %s (gRPC %s), counters in %s\n", n.httpURL, n.grpcAddr, n.counters)
	} else {
		if *redisURL != "" || *databaseURL != "" || *natsURL != "" {
			return errors.New("--redis-url, --database-url and --nats-url configure the in-process node; a --server has its own")
		}
		b.server = strings.TrimRight(*server, "/")
	}
	if *compare != "" {
		stop, err := b.setCompare(*compare)
		if err != nil {
			return err
		}
		defer stop()
	}
	b.hc = bench.NewHTTPClient(b.opts.Workers, 10*time.Second)
	b.c = &client.Client{BaseURL: b.server, APIKey: b.apiKey, HTTPClient: b.hc}

	var results []bench.Result
	for _, s := range scenarios {
		fmt.Fprintf(env.stderr, "bench: %s...\n", s.name)
		rs, err := s.run(ctx, b)
		results = append(results, rs...)
		if err != nil {
			_ = bench.WriteTable(env.stdout, results)
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return bench.WriteTable(env.stdout, results)
}

func pickScenarios(names []string) ([]benchScenario, error) {
	if len(names) == 0 {
		var out []benchScenario
		for _, s := range benchScenarios {
			if !s.notDefault {
				out = append(out, s)
			}
		}
		return out, nil
	}
	var out []benchScenario
	for _, n := range names {
		i := slices.IndexFunc(benchScenarios, func(s benchScenario) bool { return s.name == n })
		if i < 0 {
			return nil, fmt.Errorf("unknown scenario %q", n)
		}
		out = append(out, benchScenarios[i])
	}
	return out, nil
}

// setCompare reads --compare: "bare", an HTTP URL or a gRPC address.
func (b *benchRun) setCompare(v string) (stop func(), err error) {
	switch {
	case v == "bare":
		return b.startBare()
	case strings.HasPrefix(v, "http://"), strings.HasPrefix(v, "https://"):
		b.compareHTTP = v
	default:
		b.compareGRPC = v
	}
	return func() {}, nil
}

// benchNodeEngines are the engines of the in-process node; empty ones are
// embedded.
type benchNodeEngines struct{ redis, database, nats string }

// benchNode is a Sluice node serving in this process for `sluice bench`.
type benchNode struct {
	httpURL, grpcAddr, counters string
	stop                        func()
}

// benchEnvoyYAML gives check-grpc a domain whose limit is never reached.
var benchEnvoyYAML = fmt.Sprintf("domain: %s\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: %d}\n", benchDomain, benchLimit)

// startBenchNode runs serve in this process on loopback spare ports with
// a temporary data dir (removed by stop), logging only errors.
func startBenchNode(ctx context.Context, env *environment, e benchNodeEngines) (*benchNode, error) {
	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return nil, err
	}
	envoyFile := filepath.Join(dir, "envoy.yaml")
	if err := os.WriteFile(envoyFile, []byte(benchEnvoyYAML), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cfg := config.Default()
	cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.EnvoyConfig = envoyFile
	cfg.RedisURL, cfg.DatabaseURL, cfg.NATSURL = e.redis, e.database, e.nats
	cfg.ShutdownTimeout = 5 * time.Second
	log := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	nodeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	addrs := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(nodeCtx, cfg, log, func(h, g string) { addrs <- [2]string{h, g} }) }()
	stop := func() {
		cancel()
		<-done
		os.RemoveAll(dir)
	}
	select {
	case a := <-addrs:
		counters := "memory"
		if e.redis != "" {
			counters = "redis"
		}
		return &benchNode{httpURL: "http://" + a[0], grpcAddr: a[1], counters: counters, stop: stop}, nil
	case err := <-done:
		cancel()
		os.RemoveAll(dir)
		return nil, err
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}
