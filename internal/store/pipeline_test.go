package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// testWrite is a write of one row into server_secrets with both forms,
// counting how often each ran. Its kind says how it behaves.
type testWrite struct {
	name, kind string
	fnRuns     int
}

const (
	writeOK          = "ok"           // inserts name
	writeTaken       = "taken"        // inserts a name that exists: unique violation
	writeBadSQL      = "bad sql"      // a statement PostgreSQL cannot prepare
	writeReaderFails = "reader fails" // inserts name, then its reader fails anyway
	writeNoPG        = "no pg"        // inserts name, has no pipelined form
)

func (w *testWrite) op(ctx context.Context, db *DB) *batchOp {
	q := db.Rebind(`INSERT INTO server_secrets (name, value, created_at) VALUES (?, 'v', 0)`)
	if w.kind == writeBadSQL {
		q = `INSERT INTO server_secrets (name, value, created_at) VALUES ($1, 'v', 0) RETURNING nope`
	}
	name := w.name
	if w.kind == writeTaken {
		name = "taken"
	}
	op := &batchOp{ctx: ctx, done: make(chan error, 1)}
	op.fn = func(ctx context.Context, tx *sql.Tx) error {
		w.fnRuns++
		_, err := tx.ExecContext(ctx, q, name)
		return err
	}
	if w.kind == writeNoPG {
		return op
	}
	op.pg = func(b *pgx.Batch) func(pgx.BatchResults) error {
		b.Queue(q, name)
		return func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return err
			}
			if w.kind == writeReaderFails {
				return errors.New("reader failed")
			}
			return nil
		}
	}
	return op
}

// TestPipelinedBatch runs group commits of hand-made writes on PostgreSQL
// and checks which form ran, what each caller got and what was kept: a
// failing write must not fail its neighbours, and a write must never run
// twice when its first run may have committed.
func TestPipelinedBatch(t *testing.T) {
	t.Parallel()
	base := enginetest.PostgresURL(t)
	tests := []struct {
		name  string
		kinds []string
		// want is each write's error: "" for none, a PostgreSQL error
		// code, or "unknown" for errOutcomeUnknown.
		want      []string
		pipelined bool     // committed in one pipelined transaction
		fnRuns    int      // how often each write's fn ran
		kept      []string // the rows written, besides "taken"
	}{
		{name: "all succeed", kinds: []string{writeOK, writeOK, writeOK}, want: []string{"", "", ""},
			pipelined: true, kept: []string{"w0", "w1", "w2"}},
		{name: "one fails", kinds: []string{writeOK, writeTaken, writeOK}, want: []string{"", "23505", ""},
			fnRuns: 1, kept: []string{"w0", "w2"}},
		{name: "the first fails", kinds: []string{writeTaken, writeOK}, want: []string{"23505", ""},
			fnRuns: 1, kept: []string{"w1"}},
		{name: "a lone write fails", kinds: []string{writeTaken}, want: []string{"23505"}, fnRuns: 1},
		{name: "a statement cannot be prepared", kinds: []string{writeOK, writeBadSQL, writeOK}, want: []string{"", "42703", ""},
			fnRuns: 1, kept: []string{"w0", "w2"}},
		{name: "a reader fails after the commit was sent", kinds: []string{writeOK, writeReaderFails, writeOK},
			want: []string{"unknown", "unknown", "unknown"}, pipelined: true, kept: []string{"w0", "w1", "w2"}},
		{name: "a write without a pipelined form", kinds: []string{writeOK, writeNoPG}, want: []string{"", ""},
			fnRuns: 1, kept: []string{"w0", "w1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := openPostgresForTest(t, base)
			if _, err := db.exec(ctx, `INSERT INTO server_secrets (name, value, created_at) VALUES ('taken', 'v', 0)`); err != nil {
				t.Fatal(err)
			}
			var (
				writes []*testWrite
				ops    []*batchOp
			)
			for i, kind := range tt.kinds {
				w := &testWrite{name: "w" + strconv.Itoa(i), kind: kind}
				writes = append(writes, w)
				ops = append(ops, w.op(ctx, db))
			}
			db.gc.commit(ops)

			for i, op := range ops {
				if err := <-op.done; !errorIs(err, tt.want[i]) {
					t.Errorf("write %d (%s) got %v, want %q", i, tt.kinds[i], err, tt.want[i])
				}
				if writes[i].fnRuns != tt.fnRuns {
					t.Errorf("write %d (%s): fn ran %d times, want %d", i, tt.kinds[i], writes[i].fnRuns, tt.fnRuns)
				}
			}
			if got := db.BatchStats().PipelinedBatches() == 1; got != tt.pipelined {
				t.Errorf("pipelined = %v, want %v", got, tt.pipelined)
			}
			if got := settingNames(t, db); !slices.Equal(got, append([]string{"taken"}, tt.kept...)) {
				t.Errorf("rows kept = %q, want taken and %q", got, tt.kept)
			}
			// The failed batch's connection was left outside a
			// transaction: the next batch runs pipelined on the pool.
			next := &testWrite{name: "next", kind: writeOK}
			before := db.BatchStats().PipelinedBatches()
			op := next.op(ctx, db)
			db.gc.commit([]*batchOp{op})
			if err := <-op.done; err != nil || db.BatchStats().PipelinedBatches() != before+1 {
				t.Errorf("next batch = %v, pipelined %v; want it committed pipelined", err, db.BatchStats().PipelinedBatches() > before)
			}
		})
	}
}

// errorIs reports whether err is what want describes (see TestPipelinedBatch).
func errorIs(err error, want string) bool {
	switch want {
	case "":
		return err == nil
	case "unknown":
		return errors.Is(err, errOutcomeUnknown)
	}
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pe.Code == want
}

func settingNames(t *testing.T, db *DB) []string {
	t.Helper()
	rows, err := db.query(t.Context(), `SELECT name FROM server_secrets ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

func openPostgresForTest(t *testing.T, base string) *DB {
	t.Helper()
	return openMigrated(t, Options{URL: enginetest.PostgresSchema(t, base), MaxOpenConns: 2})
}
