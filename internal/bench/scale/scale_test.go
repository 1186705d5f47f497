package scale_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/store"
)

// The full sizes, from the seeds: a year's links and clicks of a mid-sized
// shortener, 90 days of notifications for 1 million users, and 10 million
// rate limit keys. -scale.fraction scales them all down for a quick run.
var (
	engines     = flag.String("scale.engines", "sqlite,postgres", "comma-separated stores to grow: sqlite, postgres (SLUICE_TEST_POSTGRES_URL); empty for the rate limit keys alone")
	fraction    = flag.Float64("scale.fraction", 1, "scale every size by this much (0.01 for a smoke run)")
	links       = flag.Int64("scale.links", 10_000_000, "links at the largest step")
	clicks      = flag.Int64("scale.clicks", 100_000_000, "clicks at the largest step")
	users       = flag.Int64("scale.users", 1_000_000, "users the notifications go to")
	notifs      = flag.Int64("scale.notifications", 17_000_000, "notifications at the largest step (1.75 deliveries each)")
	keys        = flag.Int64("scale.keys", 10_000_000, "rate limit keys (memory store, and Redis when SLUICE_TEST_REDIS_URL or redis-server is there)")
	steps       = flag.String("scale.steps", "0,0.01,0.1,1", "the curve's points, as fractions of the largest step")
	runFor      = flag.Duration("scale.duration", 5*time.Second, "each redirect run")
	samples     = flag.Int("scale.samples", 300, "requests per read measured (each read's p50 and p99)")
	outDir      = flag.String("scale.out", "", "directory for results.md (default: the test's log only)")
	storeClicks = flag.Bool("scale.storeclicks", true, "record the first step's clicks through the store as the flusher does (and report its cost a click); every later step, and all with false, by bulk SQL")
	purgeShare  = flag.Float64("scale.purge", 0.01, "the share of the 90 days whose clicks the purge measured at the end deletes (the oldest)")
	keepFilled  = flag.Bool("scale.keep", false, "keep the filled SQLite file and PostgreSQL schema")
)

// TestScale grows each store step by step and measures it at every step.
func TestScale(t *testing.T) {
	if os.Getenv("SLUICE_SCALE") == "" {
		t.Skip("set SLUICE_SCALE=1 (make scale) to run the scale curve; it takes up to an hour")
	}
	bin := os.Getenv("SLUICE_SCALE_BIN")
	if bin == "" {
		bin = enginetest.SluiceBinary(t)
	}
	var report strings.Builder
	fmt.Fprintf(&report, "# Scale curve, %s\n\nfraction %g: links %d, clicks %d, notifications %d for %d users, keys %d\n",
		time.Now().UTC().Format(time.DateOnly), *fraction, scaled(*links), scaled(*clicks), scaled(*notifs), scaled(*users), scaled(*keys))
	// The engines grow side by side, each measurement alone (machine).
	var names []string
	tables := map[string]string{}
	var mu sync.Mutex
	t.Run("engines", func(t *testing.T) {
		for _, engine := range strings.Split(*engines, ",") {
			if engine = strings.TrimSpace(engine); engine == "" {
				continue // -scale.engines '' measures the rate limit keys alone
			}
			names = append(names, engine)
			t.Run(engine, func(t *testing.T) {
				t.Parallel()
				rows := growAndMeasure(t, bin, engine)
				mu.Lock()
				tables[engine] = rows
				mu.Unlock()
			})
		}
	})
	for _, engine := range names {
		report.WriteString(tables[engine])
	}
	t.Run("ratelimit", func(t *testing.T) { report.WriteString(measureKeys(t)) })
	t.Log("\n" + report.String())
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*outDir, "results.md"), []byte(report.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func scaled(n int64) int64 { return int64(float64(n) * *fraction) }

// growAndMeasure fills one engine's store step by step; at each step it
// starts a node on it and measures reads and redirects, and the store's
// size and its own sweeps. It returns the engine's markdown table.
func growAndMeasure(t *testing.T, bin, engine string) string {
	ctx := context.Background()
	dir := t.TempDir()
	if *keepFilled {
		d, err := os.MkdirTemp("", "sluice-scale-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
		t.Logf("data dir kept: %s", dir)
	}
	opts := store.Options{DataDir: dir, MaxOpenConns: 4}
	switch engine {
	case "sqlite":
	case "postgres":
		base := enginetest.PostgresURL(t)
		if *keepFilled {
			opts.URL = keptSchema(t, base)
		} else {
			opts.URL = enginetest.PostgresSchema(t, base)
		}
	default:
		t.Fatalf("unknown engine %q (sqlite or postgres)", engine)
	}
	db, err := store.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	g := newGrower(t, db, engine, dir)
	var out strings.Builder
	fmt.Fprintf(&out, "\n## %s\n\n%s\n%s\n", engine, stepHeader, stepRule)
	for _, f := range parseSteps(t) {
		start := time.Now()
		g.growTo(ctx, int64(f*float64(scaled(*links))), int64(f*float64(scaled(*clicks))), int64(f*float64(scaled(*notifs))))
		t.Logf("%s: grown to links %d, clicks %d, notifications %d in %s", engine, g.links, g.clicks, g.notifs, time.Since(start).Round(time.Second))
		var m stepFigures
		measuring(func() { m = measureStep(t, bin, engine, opts.URL, dir, g) })
		out.WriteString(m.row(g))
		t.Logf("%s: %s", engine, m.row(g))
	}
	out.WriteString(g.flushNote)
	out.WriteString(g.purge(ctx))
	return out.String()
}

func parseSteps(t *testing.T) []float64 {
	var fs []float64
	for _, s := range strings.Split(*steps, ",") {
		var f float64
		if _, err := fmt.Sscanf(strings.TrimSpace(s), "%g", &f); err != nil || f < 0 || f > 1 {
			t.Fatalf("-scale.steps: %q is not a fraction in [0, 1]", s)
		}
		fs = append(fs, f)
	}
	return fs
}
