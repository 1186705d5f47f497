package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/config"
)

// runBench is `sluice bench [flags] [SCENARIO...]`.
func runBench(ctx context.Context, env *environment, args []string) error {
	b := &bench.Session{Log: env.stderr}
	fs, f := benchFlagSet(env, b)
	names, err := parseFlags(env.stdout, fs, args)
	if err != nil {
		return err
	}
	scenarios, err := f.settle(env, fs, b, names)
	if err != nil {
		return err
	}
	if err := f.setTLS(b); err != nil {
		return err
	}
	stopNode, err := f.target(ctx, env, b)
	if err != nil {
		return err
	}
	defer stopNode()
	stopCompare, err := f.compareWith(b)
	if err != nil {
		return err
	}
	defer stopCompare()
	stopProfiles, err := startProfiles(*f.cpuProfile, *f.blockProfile)
	if err != nil {
		return err
	}
	defer stopProfiles()
	return b.Run(ctx, env.stdout, scenarios)
}

// benchFlags are the flags of `sluice bench` that are not fields of its
// bench.Session: the target, TLS, the in-process node's engines, the
// comparison and the profiles.
type benchFlags struct {
	server, apiKey                 *string
	httpTLS, grpcTLS               clientTLS
	grpcOn, compareTLS             *bool
	redisURL, databaseURL, natsURL *string
	cpuProfile, blockProfile       *string
	compare                        *string
}

// benchFlagSet registers the flags of `sluice bench`, those of the
// session on b's fields.
func benchFlagSet(env *environment, b *bench.Session) (*flag.FlagSet, *benchFlags) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	f := &benchFlags{}
	f.server = fs.String("server", "", "Sluice server URL to load; empty starts a node in this process")
	fs.StringVar(&b.GRPCAddr, "grpc-server", "", "gRPC address of --server for check-grpc (host:port)")
	f.apiKey = fs.String("api-key", "", "API key for --server (default $SLUICE_API_KEY); admin scope lets bench create its policy and links;\n"+
		"check-grpc sends it too (authorization: Bearer), for a node with --grpc-require-key")
	f.httpTLS.register(fs, "", "an https:// --server", false)
	f.grpcOn = fs.Bool("grpc-tls", false, "dial --grpc-server over TLS (default: plaintext HTTP/2), checked and authenticated with the --grpc-* TLS flags")
	f.grpcTLS.register(fs, "grpc-", "--grpc-server", true)
	f.compareTLS = fs.Bool("compare-tls", false, "dial a --compare host:port over TLS, with --grpc-ca-file, --grpc-cert-file and --grpc-key-file")
	f.redisURL = fs.String("redis-url", "", "in-process node only: keep counters in this Redis (use a private one)")
	f.databaseURL = fs.String("database-url", "", "in-process node only: PostgreSQL URL instead of SQLite in a temp dir")
	f.natsURL = fs.String("nats-url", "", "in-process node only: external NATS instead of the embedded one")
	fs.IntVar(&b.Options.Workers, "workers", 64, "requests in flight at once (closed loop)")
	fs.DurationVar(&b.Options.Duration, "duration", 5*time.Second, "how long each scenario runs on each target (with --requests: only if given)")
	fs.Int64Var(&b.Options.Requests, "requests", 0, "stop each run after this many requests (0: only --duration bounds it)")
	fs.IntVar(&b.Keys, "keys", 1024, "distinct rate limit keys the checks spread over")
	fs.StringVar(&b.Policy, "policy", "", "policy for check-http (default: bench creates "+bench.DefaultPolicy+", a limit too high to refuse)")
	fs.StringVar(&b.Domain, "domain", bench.DefaultDomain, "Envoy domain for check-grpc (the in-process node also has "+bench.LocalDomain+", the same rule with sync: local)")
	fs.StringVar(&b.Descriptor, "descriptor", "remote_address", "Envoy descriptor key for check-grpc")
	fs.IntVar(&b.PerCall, "descriptors", 1, "descriptors per ShouldRateLimit call (batching)")
	fs.IntVar(&b.Links, "links", 100, "links the redirect scenario creates and spreads its GETs over")
	fs.StringVar(&b.UserAgent, "user-agent", bench.BrowserUserAgent, "User-Agent of the redirect scenario's requests (a tool's is recorded as a bot hit)")
	fs.IntVar(&b.Rounds, "rounds", 1, "with --compare: run check-http and redirect this many times on each side, alternating")
	fs.IntVar(&b.Campaign, "campaign", 10_000, "users the campaign scenario sends a marketing notification to")
	fs.StringVar(&b.NotifyMix, "notify-mix", "all", "channels of the notify scenario: all (email, sms and push each) or seeds (1.75 per notification)")
	fs.DurationVar(&b.DrainTimeout, "drain-timeout", 5*time.Minute, "longest wait for notifications to be delivered, and workflow runs to wait or end")
	fs.IntVar(&b.Workflows.WaitingRuns, "waiting-runs", 10_000, "runs workflow-resume keeps waiting for an event (started through POST /v1/events/batch)")
	fs.Float64Var(&b.Workflows.ResumeRate, "resume-rate", 200, "events a second workflow-resume sends to resume its waiting runs (one each, for --duration or --requests)")
	fs.IntVar(&b.Workflows.CartUsers, "cart-users", 100_000, "users the cart scenario takes through the abandoned cart")
	f.cpuProfile = fs.String("cpuprofile", "", "write a pprof CPU profile of this process (load generator and in-process node) to this file")
	f.blockProfile = fs.String("blockprofile", "", "write a pprof block profile (where goroutines waited) to this file")
	f.compare = fs.String("compare", "", "also drive another implementation with the same load: an HTTP URL (plain endpoint),\n"+
		"a host:port (Envoy RLS gRPC server), or \"bare\" (an in-process handler and gRPC server that answer at once)")
	var about strings.Builder
	about.WriteString("Drives load at a Sluice server (or a node it starts in process) and prints one table.\n" +
		"A TLS node: --server https://... (--ca-file for a private CA), and for check-grpc --grpc-tls\n" +
		"(--grpc-ca-file, --grpc-cert-file/--grpc-key-file for mutual TLS, --api-key for --grpc-require-key).\n\n" +
		"Scenarios (default: all but events, workflow-resume and cart, which run when named):")
	for _, s := range bench.Scenarios() {
		fmt.Fprintf(&about, "\n  %-15s %s", s.Name, s.Summary)
	}
	setUsage(fs, "bench [flags] [SCENARIO...]", about.String())
	return fs, f
}

// settle checks the parsed flags, settles b's bounds and API key and
// returns the scenarios names picks.
func (f *benchFlags) settle(env *environment, fs *flag.FlagSet, b *bench.Session, names []string) ([]bench.Scenario, error) {
	if b.NotifyMix != "all" && b.NotifyMix != "seeds" {
		return nil, fmt.Errorf("--notify-mix %q: want all or seeds", b.NotifyMix)
	}
	scenarios, err := bench.PickScenarios(names)
	if err != nil {
		fs.Usage()
		return nil, err
	}
	// --requests alone bounds a run by count; --duration's default applies
	// only when it is named or no count is given.
	durationSet := false
	fs.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
	if b.Options.Requests > 0 && !durationSet {
		b.Options.Duration = 0
	}
	if b.Options.Duration <= 0 && b.Options.Requests <= 0 {
		return nil, errors.New("--duration or --requests must be positive")
	}
	if b.Workflows.ResumeRate <= 0 {
		return nil, fmt.Errorf("--resume-rate %g: want a positive rate", b.Workflows.ResumeRate)
	}
	b.Keys, b.Links, b.PerCall, b.Campaign = max(1, b.Keys), max(1, b.Links), max(1, b.PerCall), max(1, b.Campaign)
	b.Workflows.WaitingRuns, b.Workflows.CartUsers = max(1, b.Workflows.WaitingRuns), max(1, b.Workflows.CartUsers)
	b.APIKey = cmp.Or(*f.apiKey, env.getenv("SLUICE_API_KEY"))
	return scenarios, nil
}

// setTLS sets b's TLS for Sluice's gRPC (--grpc-tls) and HTTPS.
func (f *benchFlags) setTLS(b *bench.Session) (err error) {
	if f.grpcTLS.set() && !*f.grpcOn && !*f.compareTLS {
		return errors.New("the --grpc-* TLS flags take effect with --grpc-tls (Sluice's gRPC) or --compare-tls")
	}
	if *f.grpcOn {
		if b.GRPCAddr == "" || *f.server == "" {
			return errors.New("--grpc-tls needs --server and --grpc-server (the in-process node serves plaintext)")
		}
		if b.GRPCTLS, err = f.grpcTLS.config(b.GRPCAddr); err != nil {
			return err
		}
	}
	if f.httpTLS.set() {
		hc, err := f.httpTLS.httpClient(*f.server)
		if err != nil {
			return err
		}
		b.TLS = hc.Transport.(*http.Transport).TLSClientConfig
	}
	return nil
}

// target points b at --server or, without one, at a node it starts in
// this process; stop stops that node.
func (f *benchFlags) target(ctx context.Context, env *environment, b *bench.Session) (stop func(), err error) {
	if *f.server != "" {
		if *f.redisURL != "" || *f.databaseURL != "" || *f.natsURL != "" {
			return nil, errors.New("--redis-url, --database-url and --nats-url configure the in-process node; a --server has its own")
		}
		b.Server = strings.TrimRight(*f.server, "/")
		return func() {}, nil
	}
	n, err := startBenchNode(ctx, env, benchNodeEngines{redis: *f.redisURL, database: *f.databaseURL, nats: *f.natsURL})
	if err != nil {
		return nil, fmt.Errorf("in-process node: %w", err)
	}
	b.Server, b.GRPCAddr = n.httpURL, n.grpcAddr
	fmt.Fprintf(env.stderr, "bench: in-process node on %s (gRPC %s), counters in %s\n", n.httpURL, n.grpcAddr, n.counters)
	return n.stop, nil
}

// compareWith sets b's comparison (--compare), over TLS with
// --compare-tls; stop stops what it started.
func (f *benchFlags) compareWith(b *bench.Session) (stop func(), err error) {
	stop = func() {}
	if *f.compare != "" {
		if stop, err = b.SetCompare(*f.compare); err != nil {
			return nil, err
		}
	}
	if *f.compareTLS {
		if b.CompareGRPC == "" || *f.compare == "bare" {
			stop()
			return nil, errors.New("--compare-tls is for a --compare host:port (a gRPC server)")
		}
		ct := f.grpcTLS
		ct.serverName = "" // --grpc-server-name names Sluice's
		if b.CompareGRPCTLS, err = ct.config(b.CompareGRPC); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// startProfiles starts the CPU profile and block profiling asked for and
// returns what writes them out.
func startProfiles(cpu, block string) (stop func(), err error) {
	var cpuFile *os.File
	if cpu != "" {
		if cpuFile, err = os.Create(cpu); err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(cpuFile); err != nil {
			cpuFile.Close()
			return nil, err
		}
	}
	if block != "" {
		runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	}
	return func() {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			cpuFile.Close()
		}
		if block != "" {
			if f, err := os.Create(block); err == nil {
				_ = pprof.Lookup("block").WriteTo(f, 0)
				f.Close()
			}
			runtime.SetBlockProfileRate(0)
		}
	}, nil
}

// benchNodeEngines are the engines of the in-process node; empty ones are
// embedded.
type benchNodeEngines struct{ redis, database, nats string }

// benchNode is a Sluice node serving in this process for `sluice bench`.
type benchNode struct {
	httpURL, grpcAddr, counters string
	stop                        func()
}

// startBenchNode runs serve in this process on loopback spare ports with
// a temporary data dir (removed by stop), logging only errors.
func startBenchNode(ctx context.Context, env *environment, e benchNodeEngines) (*benchNode, error) {
	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return nil, err
	}
	envoyDir := filepath.Join(dir, "envoy")
	if err := os.Mkdir(envoyDir, 0o700); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for name, body := range bench.EnvoyConfig() {
		if err := os.WriteFile(filepath.Join(envoyDir, name), body, 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	cfg := config.Default()
	cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.EnvoyConfig = envoyDir
	cfg.RedisURL, cfg.DatabaseURL, cfg.NATSURL = e.redis, e.database, e.nats
	cfg.ShutdownTimeout = 5 * time.Second
	log := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	nodeCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	addrs := make(chan bound, 1)
	done := make(chan error, 1)
	go func() { done <- serve(nodeCtx, cfg, log, func(b bound) { addrs <- b }) }()
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
		return &benchNode{httpURL: "http://" + a.HTTP, grpcAddr: a.GRPC, counters: counters, stop: stop}, nil
	case err := <-done:
		cancel()
		os.RemoveAll(dir)
		return nil, err
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
}
