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
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	b := &bench.Session{Log: env.stderr}
	server := fs.String("server", "", "Sluice server URL to load; empty starts a node in this process")
	fs.StringVar(&b.GRPCAddr, "grpc-server", "", "gRPC address of --server for check-grpc (host:port)")
	apiKey := fs.String("api-key", "", "API key for --server (default $SLUICE_API_KEY); admin scope lets bench create its policy and links;\n"+
		"check-grpc sends it too (authorization: Bearer), for a node with --grpc-require-key")
	var httpTLS, grpcTLS clientTLS
	httpTLS.register(fs, "", "an https:// --server", false)
	grpcOn := fs.Bool("grpc-tls", false, "dial --grpc-server over TLS (default: plaintext HTTP/2), checked and authenticated with the --grpc-* TLS flags")
	grpcTLS.register(fs, "grpc-", "--grpc-server", true)
	compareTLS := fs.Bool("compare-tls", false, "dial a --compare host:port over TLS, with --grpc-ca-file, --grpc-cert-file and --grpc-key-file")
	redisURL := fs.String("redis-url", "", "in-process node only: keep counters in this Redis (use a private one)")
	databaseURL := fs.String("database-url", "", "in-process node only: PostgreSQL URL instead of SQLite in a temp dir")
	natsURL := fs.String("nats-url", "", "in-process node only: external NATS instead of the embedded one")
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
	fs.DurationVar(&b.DrainTimeout, "drain-timeout", 5*time.Minute, "longest wait for notifications to be delivered")
	cpuProfile := fs.String("cpuprofile", "", "write a pprof CPU profile of this process (load generator and in-process node) to this file")
	blockProfile := fs.String("blockprofile", "", "write a pprof block profile (where goroutines waited) to this file")
	compare := fs.String("compare", "", "also drive another implementation with the same load: an HTTP URL (plain endpoint),\n"+
		"a host:port (Envoy RLS gRPC server), or \"bare\" (an in-process handler and gRPC server that answer at once)")
	var about strings.Builder
	about.WriteString("Drives load at a Sluice server (or a node it starts in process) and prints one table.\n" +
		"A TLS node: --server https://... (--ca-file for a private CA), and for check-grpc --grpc-tls\n" +
		"(--grpc-ca-file, --grpc-cert-file/--grpc-key-file for mutual TLS, --api-key for --grpc-require-key).\n\nScenarios (default: all):")
	for _, s := range bench.Scenarios() {
		fmt.Fprintf(&about, "\n  %-11s %s", s.Name, s.Summary)
	}
	setUsage(fs, "bench [flags] [SCENARIO...]", about.String())
	names, err := parseFlags(env.stdout, fs, args)
	if err != nil {
		return err
	}
	if b.NotifyMix != "all" && b.NotifyMix != "seeds" {
		return fmt.Errorf("--notify-mix %q: want all or seeds", b.NotifyMix)
	}
	scenarios, err := bench.PickScenarios(names)
	if err != nil {
		fs.Usage()
		return err
	}
	// --requests alone bounds a run by count; --duration's default applies
	// only when it is named or no count is given.
	durationSet := false
	fs.Visit(func(f *flag.Flag) { durationSet = durationSet || f.Name == "duration" })
	if b.Options.Requests > 0 && !durationSet {
		b.Options.Duration = 0
	}
	if b.Options.Duration <= 0 && b.Options.Requests <= 0 {
		return errors.New("--duration or --requests must be positive")
	}
	b.Keys, b.Links, b.PerCall, b.Campaign = max(1, b.Keys), max(1, b.Links), max(1, b.PerCall), max(1, b.Campaign)
	b.APIKey = cmp.Or(*apiKey, env.getenv("SLUICE_API_KEY"))

	if grpcTLS.set() && !*grpcOn && !*compareTLS {
		return errors.New("the --grpc-* TLS flags take effect with --grpc-tls (Sluice's gRPC) or --compare-tls")
	}
	if *grpcOn {
		if b.GRPCAddr == "" || *server == "" {
			return errors.New("--grpc-tls needs --server and --grpc-server (the in-process node serves plaintext)")
		}
		if b.GRPCTLS, err = grpcTLS.config(b.GRPCAddr); err != nil {
			return err
		}
	}
	if httpTLS.set() {
		hc, err := httpTLS.httpClient(*server)
		if err != nil {
			return err
		}
		b.TLS = hc.Transport.(*http.Transport).TLSClientConfig
	}

	if *server == "" {
		n, err := startBenchNode(ctx, env, benchNodeEngines{redis: *redisURL, database: *databaseURL, nats: *natsURL})
		if err != nil {
			return fmt.Errorf("in-process node: %w", err)
		}
		defer n.stop()
		b.Server, b.GRPCAddr = n.httpURL, n.grpcAddr
		fmt.Fprintf(env.stderr, "bench: in-process node on %s (gRPC %s), counters in %s\n", n.httpURL, n.grpcAddr, n.counters)
	} else {
		if *redisURL != "" || *databaseURL != "" || *natsURL != "" {
			return errors.New("--redis-url, --database-url and --nats-url configure the in-process node; a --server has its own")
		}
		b.Server = strings.TrimRight(*server, "/")
	}
	if *compare != "" {
		stop, err := b.SetCompare(*compare)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *compareTLS {
		if b.CompareGRPC == "" || *compare == "bare" {
			return errors.New("--compare-tls is for a --compare host:port (a gRPC server)")
		}
		ct := grpcTLS
		ct.serverName = "" // --grpc-server-name names Sluice's
		if b.CompareGRPCTLS, err = ct.config(b.CompareGRPC); err != nil {
			return err
		}
	}
	stopProfiles, err := startProfiles(*cpuProfile, *blockProfile)
	if err != nil {
		return err
	}
	defer stopProfiles()
	return b.Run(ctx, env.stdout, scenarios)
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
