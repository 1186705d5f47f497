package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/workflow"
)

// scaleEngines opens a new migrated store per engine, as subtests.
func scaleEngines(t *testing.T, check func(t *testing.T, db *DB)) {
	t.Helper()
	for _, e := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "sluice.db") }},
		{"postgres", func(t *testing.T) string { return enginetest.PostgresSchema(t, enginetest.PostgresURL(t)) }},
	} {
		t.Run(e.name, func(t *testing.T) {
			db, err := Open(t.Context(), Options{URL: e.url(t), MaxOpenConns: 4})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { _ = db.Close() })
			if _, err := db.Migrate(t.Context()); err != nil {
				t.Fatal(err)
			}
			check(t, db)
		})
	}
}

// scaleT0 is when the scale tests' runs start.
var scaleT0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// scaleRun is run i of a realistic waiting run: an abandoned cart's
// reminder sent, waiting for the order of that cart for 24 hours, with a
// data object of about 200 bytes. Runs are spread over users/4 users, 4
// each, and their deadlines over the day after scaleT0.
func scaleRun(i, users int) workflow.Run {
	at := scaleT0.Add(time.Duration(i) * time.Millisecond)
	cart := fmt.Sprintf("c_%07d", i)
	until := scaleT0.Add(time.Hour + time.Duration(i%86_400)*time.Second)
	return workflow.Run{
		ID: fmt.Sprintf("run_%012x%012x", at.UnixMilli(), i*7919), Workflow: "abandoned_cart", Version: 3,
		UserID: fmt.Sprintf("user_%07d", i%users), Status: workflow.StatusWaiting, Position: 1, Seq: 4,
		Data: json.RawMessage(`{"cart_id":"` + cart + `","items":[{"sku":"SKU-1234","qty":1,"price":1999},` +
			`{"sku":"SKU-5678","qty":2,"price":2499}],"total":6997,"currency":"EUR","url":"https://shop.example.com/cart/` + cart + `"}`),
		WaitEvent: "order.placed", WaitMatch: json.RawMessage(`{"cart_id":"` + cart + `"}`), DueAt: until,
		Steps: []workflow.StepRecord{
			{Index: 0, Name: "reminder", Kind: "send", Status: "completed", StartedAt: at, EndedAt: at, NotificationID: fmt.Sprintf("ntf_%024x", i)},
			{Index: 1, Name: "wait_order", Kind: "wait_for", Status: "waiting", StartedAt: at, Until: until},
		},
		EventID: fmt.Sprintf("evt_%024x", i), CreatedAt: at, UpdatedAt: at,
	}
}

// fillRuns inserts runs [from, to) of scaleRun, 500 a statement.
func fillRuns(t *testing.T, db *DB, from, to, users int) {
	t.Helper()
	ctx := context.Background()
	const per = 500
	row := "(" + marks(15) + ")"
	for lo := from; lo < to; lo += 20 * per {
		err := db.InTx(ctx, func(tx *sql.Tx) error {
			for s := lo; s < min(lo+20*per, to); s += per {
				e := min(s+per, to)
				args := make([]any, 0, 15*(e-s))
				for i := s; i < e; i++ {
					a, err := runArgs(scaleRun(i, users))
					if err != nil {
						return err
					}
					args = append(args, a...)
				}
				q := strings.TrimSuffix(insertRunQuery, row) + strings.TrimSuffix(strings.Repeat(row+", ", e-s), ", ")
				if _, err := tx.ExecContext(ctx, db.Rebind(q), args...); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("fill runs: %v", err)
		}
	}
}

// runBytes is the bytes workflow_runs takes with its indexes (on
// PostgreSQL, TOAST and the free space and visibility maps included).
func runBytes(t *testing.T, db *DB) int64 {
	t.Helper()
	q := `SELECT SUM(pgsize) FROM dbstat WHERE name = 'workflow_runs' OR name IN
		(SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'workflow_runs')`
	if db.dialect == DialectPostgres {
		q = `SELECT pg_total_relation_size('workflow_runs')`
	}
	var n int64
	if err := db.write.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("size of workflow_runs: %v", err)
	}
	return n
}

// runBytesByPart is the bytes of the table and of each of its indexes.
func runBytesByPart(t *testing.T, db *DB) map[string]int64 {
	t.Helper()
	q := `SELECT name, SUM(pgsize) FROM dbstat WHERE name = 'workflow_runs' OR name IN
		(SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'workflow_runs') GROUP BY name`
	if db.dialect == DialectPostgres {
		q = `SELECT 'workflow_runs', pg_relation_size('workflow_runs') UNION ALL
			SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			WHERE i.indrelid = 'workflow_runs'::regclass`
	}
	rows, err := db.write.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatalf("sizes of workflow_runs: %v", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			name string
			n    int64
		)
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	return out
}

// TestWorkflowRunBytes measures what a waiting run costs in the store (its
// row and its index entries, TOAST included) on each engine, for the
// sizing in docs/benchmarks.md, and fails if it grows past the bound
// stated there. SLUICE_WORKFLOW_RUNS sets how many runs (default 20,000;
// the figures there are for 100,000).
func TestWorkflowRunBytes(t *testing.T) {
	t.Parallel()
	n := 20_000
	if v := os.Getenv("SLUICE_WORKFLOW_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	bounds := map[string]float64{DialectSQLite: 1200, DialectPostgres: 1200}
	scaleEngines(t, func(t *testing.T, db *DB) {
		before := runBytes(t, db)
		fillRuns(t, db, 0, n, max(n/4, 1))
		if db.dialect == DialectPostgres {
			if _, err := db.write.ExecContext(t.Context(), `VACUUM ANALYZE workflow_runs`); err != nil {
				t.Fatal(err)
			}
		}
		per := float64(runBytes(t, db)-before) / float64(n)
		t.Logf("%s: %.0f bytes per waiting run (row and indexes), %d runs", db.dialect, per, n)
		for name, b := range runBytesByPart(t, db) {
			t.Logf("%s: %-34s %5.0f bytes a run", db.dialect, name, float64(b)/float64(n))
		}
		if per > bounds[db.dialect] {
			t.Errorf("%s: %.0f bytes per waiting run, over the %.0f docs/benchmarks.md states", db.dialect, per, bounds[db.dialect])
		}
	})
}

// TestWorkflowRunsAtScale times the scheduler's and the events' queries
// with SLUICE_WORKFLOW_SCALE waiting runs (1000000 for the figures in
// docs/benchmarks.md); skipped when unset, as it takes minutes.
func TestWorkflowRunsAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SLUICE_WORKFLOW_SCALE"))
	if n == 0 {
		t.Skip("set SLUICE_WORKFLOW_SCALE=1000000 to run")
	}
	users := n / 4
	scaleEngines(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		start := time.Now()
		fillRuns(t, db, 0, n, users)
		if db.dialect == DialectPostgres {
			if _, err := db.write.ExecContext(ctx, `VACUUM ANALYZE workflow_runs`); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: %d waiting runs of %d users in %v, %.0f bytes each", db.dialect, n, users, time.Since(start).Round(time.Second),
			float64(runBytes(t, db))/float64(n))
		lease := 30 * time.Second
		timeOp(t, db.dialect, "ClaimDue(500), none due", 200, func(int) {
			if runs, err := db.ClaimDue(ctx, scaleT0, lease, 500); err != nil || len(runs) != 0 {
				t.Fatalf("ClaimDue = %d, %v", len(runs), err)
			}
		})
		due := scaleT0.Add(48 * time.Hour) // every run due: each claim takes 500 more
		timeOp(t, db.dialect, "ClaimDue(500), all due", 100, func(int) {
			if runs, err := db.ClaimDue(ctx, due, lease, 500); err != nil || len(runs) != 500 {
				t.Fatalf("ClaimDue = %d, %v", len(runs), err)
			}
		})
		timeOp(t, db.dialect, "ClaimRun", 1000, func(i int) {
			if _, _, err := db.ClaimRun(ctx, scaleRun(n-1-i, users).ID, due, lease); err != nil {
				t.Fatalf("ClaimRun: %v", err)
			}
		})
		timeOp(t, db.dialect, "WaitingRuns(user, event)", 1000, func(i int) {
			r := scaleRun((i*7919)%(n/2), users)
			if runs, err := db.WaitingRuns(ctx, r.UserID, "order.placed", scaleT0, 100); err != nil || len(runs) == 0 {
				t.Fatalf("WaitingRuns(%s) = %d, %v", r.UserID, len(runs), err)
			}
		})
		timeOp(t, db.dialect, "CountLiveRuns(user)", 1000, func(i int) {
			if c, err := db.CountLiveRuns(ctx, scaleRun(i*7919%n, users).UserID); err != nil || c == 0 {
				t.Fatalf("CountLiveRuns = %d, %v", c, err)
			}
		})
		timeOp(t, db.dialect, "event: WaitingRuns, RecordEvent resuming 1", 500, func(i int) {
			user := scaleRun((i*7919)%(n/2), users).UserID
			ws, err := db.WaitingRuns(ctx, user, "order.placed", scaleT0, 100)
			if err != nil || len(ws) == 0 {
				t.Fatalf("WaitingRuns(%s) = %d, %v", user, len(ws), err)
			}
			r := ws[0]
			r.Status, r.Position, r.DueAt, r.WaitEvent = workflow.StatusRunning, 2, due, ""
			e, _, err := db.RecordEvent(ctx, workflow.Event{ID: fmt.Sprintf("evt_scale_%d", i), Name: "order.placed", UserID: user,
				Data: json.RawMessage(`{}`), CreatedAt: due}, nil, nil, []workflow.Resume{{Run: r, Seq: r.Seq}})
			if err != nil || len(e.RunsResumed) != 1 {
				t.Fatalf("RecordEvent = %+v, %v", e, err)
			}
		})
		timeOp(t, db.dialect, "CountRuns (the gauge)", 5, func(int) {
			if _, err := db.CountRuns(ctx); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// timeOp runs op n times one after another and logs its median, p99 and
// worst latency.
func timeOp(t *testing.T, engine, name string, n int, op func(i int)) {
	t.Helper()
	ds := make([]time.Duration, n)
	for i := range n {
		start := time.Now()
		op(i)
		ds[i] = time.Since(start)
	}
	slices.SortFunc(ds, func(a, b time.Duration) int { return cmp.Compare(a, b) })
	t.Logf("%s: %-44s median %8v  p99 %8v  max %8v  (%d calls)", engine, name,
		ds[n/2].Round(time.Microsecond), ds[n*99/100].Round(time.Microsecond), ds[n-1].Round(time.Microsecond), n)
}
