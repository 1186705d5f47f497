package scale_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/workflow"
)

// The workflow runs' scale: a store holding up to a million runs waiting
// for an event (an abandoned cart's order, a month away), measured from
// outside as events resume a sample of them and the deadlines of others
// pass.
var (
	wfRuns      = flag.Int64("scale.runs", 1_000_000, "TestWorkflowScale: waiting workflow runs at the largest step (4 a user)")
	wfSteps     = flag.String("scale.runsteps", "0.01,0.1,1", "TestWorkflowScale: the steps, as fractions of -scale.runs")
	wfResumes   = flag.Int("scale.resumes", 1000, "TestWorkflowScale: events sent at each step, each resuming one run added by that step")
	wfRate      = flag.Float64("scale.resumerate", 100, "TestWorkflowScale: events a second")
	wfDeadlines = flag.Int("scale.deadlines", 500, "TestWorkflowScale: runs added at each step whose deadlines pass while the events go")
)

// scaleWorkflow is the waiting runs' workflow: a reminder sent, the wait
// for the order of the cart, a thank-you. The fill puts every run at the
// wait (step 1), as the engine leaves it.
const scaleWorkflow = `{"trigger": {"event": "bench.cart.abandoned"}, "steps": [
  {"name": "remind", "send": {"type": "order.shipped", "channels": ["email"]}},
  {"name": "wait_order", "wait_for": {"event": "bench.order.placed", "match": {"cart_id": "{cart_id}"}, "timeout": "720h"}},
  {"name": "thanks", "send": {"type": "order.shipped", "channels": ["email"]}}]}`

const runFillBatch = 20_000

// TestWorkflowScale fills each engine's store with waiting runs step by
// step (10,000, 100,000 and 1 million at full size) and, at each step,
// starts `sluice serve` on it (PostgreSQL with a NATS server of its own)
// and measures: the store's bytes per waiting run, the resume latency of
// a sample of them (the event's created time to the next step's start, on
// the server's clock), and how late the deadlines of runs added to pass
// meanwhile end their waits.
//
//	SLUICE_SCALE=1 SLUICE_TEST_POSTGRES_URL=... go test -run TestWorkflowScale -v -timeout 2h ./internal/bench/scale/
func TestWorkflowScale(t *testing.T) {
	if os.Getenv("SLUICE_SCALE") == "" {
		t.Skip("set SLUICE_SCALE=1 to measure workflow runs at scale; it takes up to half an hour")
	}
	bin := os.Getenv("SLUICE_SCALE_BIN")
	if bin == "" {
		bin = enginetest.SluiceBinary(t)
	}
	var names []string
	tables := map[string]string{}
	var mu sync.Mutex
	t.Run("engines", func(t *testing.T) {
		for _, engine := range strings.Split(*engines, ",") {
			if engine = strings.TrimSpace(engine); engine == "" {
				continue
			}
			names = append(names, engine)
			t.Run(engine, func(t *testing.T) {
				t.Parallel()
				rows := growRuns(t, bin, engine)
				mu.Lock()
				tables[engine] = rows
				mu.Unlock()
			})
		}
	})
	report := fmt.Sprintf("# Workflow runs at scale, %s\n\nfraction %g: up to %d waiting runs; %d events at %g/s and %d deadlines a step\n",
		time.Now().UTC().Format(time.DateOnly), *fraction, scaled(*wfRuns), *wfResumes, *wfRate, *wfDeadlines)
	for _, engine := range names {
		report += tables[engine]
	}
	t.Log("\n" + report)
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*outDir, "workflows.md"), []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runGrower fills one engine's store with waiting runs.
type runGrower struct {
	t      *testing.T
	db     *store.DB
	engine string
	dir    string
	dbURL  string
	extra  []string // the node's flags beyond the store
	now    time.Time
	users  int64 // a quarter of the largest step: 4 runs a user at full size
	runs   int64
}

func growRuns(t *testing.T, bin, engine string) string {
	ctx := context.Background()
	g := &runGrower{t: t, engine: engine, dir: t.TempDir(), now: time.Now(), users: max(1, scaled(*wfRuns)/4)}
	opts := store.Options{DataDir: g.dir, MaxOpenConns: 4}
	switch engine {
	case "sqlite":
	case "postgres":
		opts.URL = enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
		g.dbURL = opts.URL
		g.extra = []string{"--nats-url", enginetest.StartNATS(t).URL()}
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
	g.db = db
	if _, err := db.PutWorkflow(ctx, workflow.Stored{Key: "bench-scale", Trigger: "bench.cart.abandoned", Definition: json.RawMessage(scaleWorkflow)}, g.now); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n## %s\n\n%s\n%s\n", engine, runsHeader, runsRule)
	for step, f := range parseFractions(t, *wfSteps) {
		want := int64(f * float64(scaled(*wfRuns)))
		if want <= g.runs {
			continue
		}
		lo := g.runs
		before := g.size(ctx)
		fillTook := g.fill(ctx, lo, want)
		g.vacuum(ctx)
		perRun := float64(g.size(ctx)-before) / float64(want-lo)
		t.Logf("%s: %d waiting runs in %s (%.0f runs/s), %.0f bytes each", engine, want, fillTook.Round(time.Millisecond),
			float64(want-lo)/fillTook.Seconds(), perRun)
		var m runFigures
		measuring(func() { m = g.measure(ctx, bin, step, lo, want) })
		m.bytes, m.fillRate = perRun, float64(want-lo)/fillTook.Seconds()
		out.WriteString(m.row(want))
		t.Logf("%s: %s", engine, m.row(want))
	}
	return out.String()
}

// vacuum runs VACUUM ANALYZE on PostgreSQL's workflow_runs, as autovacuum
// does after a table takes a fifth of its size in inserts: without it
// (the test server runs with autovacuum off) the first reads of the
// filled rows set their hint bits, and the live runs gauge's count
// (an index-only scan only once the visibility map is set) reads the
// whole heap every 15 s: at 1 million runs each count took 1.4 to 3 s
// and resumes were seconds late.
func (g *runGrower) vacuum(ctx context.Context) {
	if g.engine != "postgres" {
		return
	}
	began := time.Now()
	err := filling(func() error {
		c, err := sql.Open("pgx", g.dbURL)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.ExecContext(ctx, "VACUUM ANALYZE workflow_runs")
		return err
	})
	if err != nil {
		g.t.Fatalf("vacuum: %v", err)
	}
	g.t.Logf("%s: vacuumed in %s", g.engine, time.Since(began).Round(time.Millisecond))
}

func (g *runGrower) size(ctx context.Context) int64 {
	return (&grower{t: g.t, db: g.db, engine: g.engine, dir: g.dir}).size(ctx)
}

// fill adds runs [lo, hi), far from their deadlines, runFillBatch a
// transaction, and returns the time its batches took (not the waits for
// the other engine's measurements between them).
func (g *runGrower) fill(ctx context.Context, lo, hi int64) time.Duration {
	var took time.Duration
	created := g.now.Add(-24 * time.Hour).UnixMicro()
	createdStep := (24 * time.Hour).Microseconds() / max(1, scaled(*wfRuns))
	until := g.now.Add(30 * 24 * time.Hour).Truncate(time.Second).UnixMicro()
	for from := lo; from < hi; from += runFillBatch {
		to := min(hi, from+runFillBatch)
		err := filling(func() error {
			began := time.Now()
			defer func() { took += time.Since(began) }()
			return g.db.InTx(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, runFill(g.engine), from, to, "run_w", "wu", g.users, created, createdStep,
					until, 86_400, time.Second.Microseconds())
				return err
			})
		})
		if err != nil {
			g.t.Fatalf("fill runs: %v", err)
		}
	}
	g.runs = hi
	return took
}

// runFill is the statement that inserts waiting runs lo to hi-1; its
// arguments: lo, hi, id prefix, user prefix, users, created from, created
// step, until from, until period, until step (times in Unix µs). Run i
// is id prefix + i, of user prefix + i % users, created at from + i*step,
// waiting for the order of its cart c<i> until until from +
// (i % period) * step, with about 200 bytes of cart data.
func runFill(engine string) string {
	p := func(n int) string { return "?" + strconv.Itoa(n) }
	series, from := "WITH RECURSIVE s(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?2) ", " FROM s"
	pad12, pad20 := "printf('%012d', i)", "printf('%020d', i)"
	stamp := func(us string) string { // RFC 3339 to the microsecond, as Go writes a time
		return "strftime('%Y-%m-%dT%H:%M:%S', (" + us + ") / 1000000, 'unixepoch') || '.' || printf('%06d', (" + us + ") % 1000000) || 'Z'"
	}
	if engine == "postgres" {
		p = func(n int) string { return "$" + strconv.Itoa(n) + "::bigint" }
		series, from = "", " FROM generate_series($1::bigint, $2::bigint - 1) AS s(i)"
		pad12, pad20 = "lpad(i::text, 12, '0')", "lpad(i::text, 20, '0')"
		stamp = func(us string) string {
			return "to_char(to_timestamp((" + us + ") / 1000000) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') || '.' || lpad(((" + us + ") % 1000000)::text, 6, '0') || 'Z'"
		}
	}
	text := func(n int) string { return strings.Replace(p(n), "::bigint", "::text", 1) }
	created := "(" + p(6) + " + i * " + p(7) + ")"
	until := "(" + p(8) + " + (i % " + p(9) + ") * " + p(10) + ")"
	cart := "'c' || i"
	steps := `'[{"index":0,"name":"remind","kind":"send","status":"completed","started_at":"' || ` + stamp(created) +
		` || '","ended_at":"' || ` + stamp(created) + ` || '","notification_id":"ntf_' || ` + pad20 +
		` || '"},{"index":1,"name":"wait_order","kind":"wait_for","status":"waiting","started_at":"' || ` + stamp(created) +
		` || '","until":"' || ` + stamp(until) + ` || '"}]'`
	data := `'{"cart_id":"' || ` + cart + ` || '","items":[{"sku":"SKU-1234","qty":1,"price":1999},{"sku":"SKU-5678","qty":2,"price":2499}],` +
		`"total":6997,"currency":"EUR","url":"https://shop.example.com/cart/' || ` + cart + ` || '"}'`
	return series + "INSERT INTO workflow_runs (id, workflow, version, user_id, status, data, position, seq, wait_event, wait_match, " +
		"due_at, steps, event_id, created_at, updated_at) SELECT " + text(3) + " || " + pad12 + ", 'bench-scale', 1, " +
		text(4) + " || (i % " + p(5) + "), 'waiting', " + data + ", 1, 3, 'bench.order.placed', " +
		`'{"cart_id":"' || ` + cart + ` || '"}', ` + until + ", " + steps + ", 'evt_' || " + pad20 + ", " + created + ", " + created + from
}

const runsHeader = "| waiting runs | bytes a waiting run | fill runs/s | start to ready | events/s (POST p50 / p99) | resume p50 / p99 (max) | deadline lateness p50 / p99 (max) | load average |"
const runsRule = "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"

// runFigures is what one step measured.
type runFigures struct {
	bytes, fillRate float64
	start           time.Duration
	events          bench.Result
	resume, late    *bench.Histogram
	load            string
}

func (m runFigures) row(runs int64) string {
	return fmt.Sprintf("| %d | %.0f | %.0f | %s | %.0f (%s / %s) | %s / %s (%s) | %s / %s (%s) | %s |\n", runs, m.bytes, m.fillRate, ms(m.start),
		m.events.Rate(), ms(m.events.Latency.Quantile(0.5)), ms(m.events.Latency.Quantile(0.99)),
		ms(m.resume.Quantile(0.5)), ms(m.resume.Quantile(0.99)), ms(m.resume.Max()),
		ms(m.late.Quantile(0.5)), ms(m.late.Quantile(0.99)), ms(m.late.Max()), m.load)
}

// measure starts a node on the store, adds -scale.deadlines runs whose
// deadlines pass from a fifth to four fifths of the way through the
// events, sends -scale.resumes events at -scale.resumerate to users of runs
// [lo, hi), and reads every run it touched back.
func (g *runGrower) measure(ctx context.Context, bin string, step int, lo, hi int64) runFigures {
	t := g.t
	n, took := startNode(t, bin, g.dbURL, g.dir, g.extra...)
	defer n.stop()
	m := runFigures{start: took, load: loadAverage(t), resume: &bench.Histogram{}, late: &bench.Histogram{}}
	c := &client.Client{BaseURL: n.base, HTTPClient: bench.NewHTTPClient(16, 30*time.Second)}
	events, k := min(int64(max(1, *wfResumes)), hi-lo), int64(max(1, *wfDeadlines)) // an event a run added
	phase := time.Duration(float64(events) / *wfRate * float64(time.Second))
	now := time.Now()
	first := now.Add(phase / 5).Truncate(time.Millisecond)
	every := max(time.Millisecond, (phase * 3 / 5 / time.Duration(k)).Truncate(time.Millisecond))
	prefix := fmt.Sprintf("run_d%d_", step)
	err := g.db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, runFill(g.engine), 0, k, prefix, fmt.Sprintf("wd%d_", step), k, now.UnixMicro(), 0,
			first.UnixMicro(), k, every.Microseconds())
		return err
	})
	if err != nil {
		t.Fatalf("add the runs with deadlines: %v", err)
	}
	lateIDs := make([]string, k)
	for i := range lateIDs {
		lateIDs[i] = fmt.Sprintf("%s%012d", prefix, i)
	}
	ids := make([]string, events)
	m.events, err = bench.Paced(ctx, "resume", g.engine, *wfRate, events, 16, func(ctx context.Context, seq int64) error {
		i := lo + seq*(hi-lo)/events
		a, err := c.SendEvent(ctx, client.Event{Name: "bench.order.placed", UserID: "wu" + strconv.FormatInt(i%g.users, 10),
			Data: map[string]any{"cart_id": "c" + strconv.FormatInt(i, 10)}})
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("run_w%012d", i); len(a.RunsResumed) != 1 || a.RunsResumed[0] != want {
			return fmt.Errorf("event %s resumed %v, want [%s]", a.EventID, a.RunsResumed, want)
		}
		ids[seq] = a.RunsResumed[0]
		return nil
	})
	if err != nil || m.events.Errors > 0 {
		t.Fatalf("resume events: %v (%d errors, first %s)", err, m.events.Errors, m.events.FirstError)
	}
	resumed, err := bench.AwaitRuns(ctx, c, ids, 2*time.Minute, func(r bench.RunTimes) bool { return r.Resumed || r.Final() })
	if err != nil {
		t.Fatalf("resumed runs: %v", err)
	}
	for _, r := range resumed {
		if !r.Resumed {
			t.Fatalf("run %s is %s after %v: not resumed", r.ID, r.Status, r.Path)
		}
		m.resume.Record(r.Resume)
	}
	late, err := bench.AwaitRuns(ctx, c, lateIDs, 2*time.Minute, bench.RunTimes.Final)
	if err != nil {
		t.Fatalf("runs with deadlines: %v", err)
	}
	for _, r := range late {
		if !r.TimedOut {
			t.Fatalf("run %s is %s after %v: its wait did not time out", r.ID, r.Status, r.Path)
		}
		m.late.Record(r.Late)
	}
	return m
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes.
func loadAverage(t *testing.T) string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Logf("load average: %v", err)
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func parseFractions(t *testing.T, list string) []float64 {
	var fs []float64
	for _, s := range strings.Split(list, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || f < 0 || f > 1 {
			t.Fatalf("%q is not a fraction in [0, 1]", s)
		}
		fs = append(fs, f)
	}
	return fs
}
