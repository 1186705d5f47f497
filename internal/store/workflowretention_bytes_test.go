package store

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/workflow"
)

// tableBytes is the bytes table takes with its indexes, and each part
// (the table, each index) apart; on PostgreSQL after VACUUM ANALYZE, with
// TOAST in the total.
func tableBytes(t *testing.T, db *DB, table string) (int64, map[string]int64) {
	t.Helper()
	ctx := t.Context()
	total := `SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name = ?1 OR name IN
		(SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?1)`
	parts := `SELECT name, SUM(pgsize) FROM dbstat WHERE name = ?1 OR name IN
		(SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?1) GROUP BY name`
	if db.dialect == DialectPostgres {
		if _, err := db.write.ExecContext(ctx, `VACUUM ANALYZE `+table); err != nil {
			t.Fatal(err)
		}
		total = `SELECT pg_total_relation_size($1::regclass)`
		parts = `SELECT $1::text, pg_relation_size($1::regclass) UNION ALL
			SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			WHERE i.indrelid = $1::regclass`
	}
	var n int64
	if err := db.write.QueryRowContext(ctx, total, table).Scan(&n); err != nil {
		t.Fatalf("size of %s: %v", table, err)
	}
	rows, err := db.write.QueryContext(ctx, parts, table)
	if err != nil {
		t.Fatalf("sizes of %s: %v", table, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var (
			name string
			b    int64
		)
		if err := rows.Scan(&name, &b); err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return n, out
}

// logBytes logs what each of n entries added to table since before (its
// total and parts), in all and by part, and returns the total a piece.
func logBytes(t *testing.T, db *DB, table, what string, before int64, beforeParts map[string]int64, n int) float64 {
	t.Helper()
	after, parts := tableBytes(t, db, table)
	per := float64(after-before) / float64(n)
	t.Logf("%s: %s: %.0f bytes each (%d)", db.dialect, what, per, n)
	for name, b := range parts {
		t.Logf("%s:   %-34s %6.0f", db.dialect, name, float64(b-beforeParts[name])/float64(n))
	}
	return per
}

// insertRows inserts n rows of row(i) args, 500 a statement.
func insertRows(t *testing.T, db *DB, insert string, cols, n int, row func(i int) []any) {
	t.Helper()
	const per = 500
	one := "(" + marks(cols) + ")"
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		args := make([]any, 0, cols*(hi-lo))
		for i := lo; i < hi; i++ {
			args = append(args, row(i)...)
		}
		q := insert + strings.TrimSuffix(strings.Repeat(one+", ", hi-lo), ", ")
		if _, err := db.write.ExecContext(t.Context(), db.Rebind(q), args...); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
}

// TestWorkflowHistoryBytes measures what the rows clients fill through
// the workflow routes cost in the store, for docs/security.md's bounds
// and docs/benchmarks.md: an event, a run that ended (its entry in the
// index the purge reads), a user's attributes (typical, and the largest),
// a workflow version; and how long the purge takes a batch. It fails
// past twice the figures stated there. SLUICE_WORKFLOW_EVENTS sets how
// many events and runs (default 20,000; the figures are for 100,000).
func TestWorkflowHistoryBytes(t *testing.T) {
	t.Parallel()
	n := 20_000
	if v := os.Getenv("SLUICE_WORKFLOW_EVENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	scaleEngines(t, func(t *testing.T, db *DB) {
		ctx := t.Context()
		check := func(what string, per, bound float64) {
			t.Helper()
			if per > 2*bound {
				t.Errorf("%s: %s takes %.0f bytes, over twice the %.0f stated", db.dialect, what, per, bound)
			}
		}

		// An event as POST /v1/events saves it: a request_id, the cart's
		// 191 bytes of data, the run it started.
		before, parts := tableBytes(t, db, "workflow_events")
		insertRows(t, db, `INSERT INTO workflow_events (`+eventColumns+`) VALUES `, 9, n, func(i int) []any {
			at := scaleT0.Add(time.Duration(i) * time.Millisecond)
			r := scaleRun(i, max(n/4, 1))
			return []any{notify.NewID("evt_", at), fmt.Sprintf("req-%012d", i), "cart.abandoned", r.UserID, string(r.Data),
				fmt.Sprintf("%032x", i), `["` + r.ID + `"]`, `[]`, at.UnixMicro()}
		})
		check("an event", logBytes(t, db, "workflow_events", "an event", before, parts, n), 600)
		timeOp(t, db.dialect, "DeleteWorkflowEventsBefore(1000)", n/1000, func(int) {
			if k, err := db.DeleteWorkflowEventsBefore(ctx, scaleT0.Add(time.Hour), 1000); err != nil || k != 1000 {
				t.Fatalf("DeleteWorkflowEventsBefore = %d, %v", k, err)
			}
		})

		// A run that ended: its row as a waiting one's, and one entry in
		// workflow_runs_ended.
		fillRuns(t, db, 0, n, max(n/4, 1))
		if _, err := db.write.ExecContext(ctx, `UPDATE workflow_runs SET status = 'completed', due_at = NULL`); err != nil {
			t.Fatal(err)
		}
		_, parts = tableBytes(t, db, "workflow_runs")
		ended := float64(parts["workflow_runs_ended"]) / float64(n)
		t.Logf("%s: a run that ended: %.0f bytes in workflow_runs_ended", db.dialect, ended)
		check("a run's entry in workflow_runs_ended", ended, 25)
		timeOp(t, db.dialect, "DeleteEndedRunsBefore(1000)", n/1000, func(int) {
			if k, err := db.DeleteEndedRunsBefore(ctx, scaleT0.Add(time.Hour), 1000); err != nil || k != 1000 {
				t.Fatalf("DeleteEndedRunsBefore = %d, %v", k, err)
			}
		})

		// A user's attributes: a typical object, and the largest.
		before, parts = tableBytes(t, db, "user_attributes")
		typical := `{"country":"DE","ltv":1234.5,"orders":12,"plan":"pro","signup":"2026-01-05"}`
		insertRows(t, db, `INSERT INTO user_attributes (user_id, attributes, updated_at) VALUES `, 3, n, func(i int) []any {
			return []any{fmt.Sprintf("user_%07d", i), typical, scaleT0.UnixMicro()}
		})
		check("a user's typical attributes", logBytes(t, db, "user_attributes", "a user's attributes, "+strconv.Itoa(len(typical))+" bytes",
			before, parts, n), 170)
		const largest = 500
		before, parts = tableBytes(t, db, "user_attributes")
		insertRows(t, db, `INSERT INTO user_attributes (user_id, attributes, updated_at) VALUES `, 3, largest, func(i int) []any {
			return []any{fmt.Sprintf("big_%07d", i), largestAttributes(i), scaleT0.UnixMicro()}
		})
		check("a user's largest attributes", logBytes(t, db, "user_attributes", "a user's attributes, 16 KiB", before, parts, largest), 17_400)

		// A version of an abandoned cart of eight steps (642 bytes of JSON).
		before, parts = tableBytes(t, db, "workflow_versions")
		def := json.RawMessage(`{"trigger":{"event":"cart.abandoned"},"entry":{"once_per":"24h"},"steps":[` +
			`{"name":"pause","wait":"1h"},{"name":"remind","send":{"type":"abandoned_cart","channels":["email","push"]}},` +
			`{"name":"await","wait_for":{"event":"order.placed","match":{"cart_id":"{cart_id}"},"timeout":"24h"},"on_timeout":"last_call"},` +
			`{"name":"bought","branch":[{"if":{"order.placed.total":{"gte":100}},"goto":"thanks"}],"else":"done"},` +
			`{"name":"thanks","send":"order.confirmed"},{"name":"done","exit":true},` +
			`{"name":"last_call","split":[{"percent":90,"goto":"final"},{"percent":10,"goto":"exit"}]},` +
			`{"name":"final","send":{"type":"abandoned_cart","channels":["email"]}}]}`)
		const versions = 2000
		for i := range versions {
			if _, err := db.PutWorkflow(ctx, workflow.Stored{Key: fmt.Sprintf("cart%d", i%10), Trigger: "cart.abandoned", Definition: def}, scaleT0); err != nil {
				t.Fatal(err)
			}
		}
		check("a workflow version", logBytes(t, db, "workflow_versions", fmt.Sprintf("a version of %d bytes", len(def)), before, parts, versions), 850)
	})
}

// largestAttributes is a user's attributes at the bound: 16 KiB of JSON,
// of random text (which does not compress), different for each i.
func largestAttributes(i int) string {
	var b strings.Builder
	b.WriteString(`{"notes":"`)
	x := uint64(i)*0x9e3779b97f4a7c15 + 1
	for b.Len() < 16<<10-2 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b.WriteByte("abcdefghijklmnopqrstuvwxyz0123456789"[x%36])
	}
	b.WriteString(`"}`)
	return b.String()
}
