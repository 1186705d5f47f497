package store_test

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
)

// TestNotifyWritesReport prints what storage writes one accepted and
// delivered notification costs (creation, then the sent outcome with its
// outbox entry, unclaimed as the worker writes it outside failover categories, 1.75 deliveries on average: email+push three times
// in four, email alone otherwise), on SQLite and PostgreSQL. Gated by
// SLUICE_WRITES_REPORT=1; rows and index entries are load-independent,
// SQLite's pages and the commits vary with how many writes each group
// commit gathers:
//
//	SLUICE_WRITES_REPORT=1 go test -run TestNotifyWritesReport -v ./internal/store/
//
// SQLite: WAL frames (pages) written, with automatic checkpoints off.
// PostgreSQL: rows inserted/updated (pg_stat_user_tables of the test's
// schema, exact) and WAL bytes from pg_current_wal_lsn (cluster-wide, so
// other writers on a shared server add noise). Both: group commits.
func TestNotifyWritesReport(t *testing.T) {
	if os.Getenv("SLUICE_WRITES_REPORT") != "1" {
		t.Skip("set SLUICE_WRITES_REPORT=1")
	}
	const n = 4000
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			opts := store.Options{DataDir: filepath.Join(t.TempDir(), "data")}
			if engine == "postgres" {
				opts = store.Options{URL: enginetest.PostgresSchema(t, enginetest.PostgresURL(t)), MaxOpenConns: 8}
			}
			db := mustOpen(t, opts)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			if _, err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			// Warm up (templates of statements, first pages) off the count.
			runNotifyWrites(t, ctx, db, "warm", 200)
			if engine == "sqlite" {
				sqliteExec(t, ctx, db, "PRAGMA wal_autocheckpoint = 0")
			}
			before := writeCounters(t, ctx, db)
			b0, o0, _ := db.BatchStats().Snapshot()
			phases := map[string][2]int64{}
			for _, ph := range []string{"create", "deliver"} {
				p0 := writeCounters(t, ctx, db)
				var frames int64
				f0 := sqliteWALFrames(t, opts.DataDir)
				runNotifyWritesPhase(t, ctx, db, "run", n, ph)
				if engine == "sqlite" {
					frames = sqliteWALFrames(t, opts.DataDir) - f0
					byTree := sqliteFramesByTree(t, ctx, db, opts.DataDir, f0)
					for _, tree := range slices.Sorted(maps.Keys(byTree)) {
						t.Logf("  %s: WAL pages of %-28s %.3f per notification", ph, tree, float64(byTree[tree])/n)
					}
				}
				p1 := writeCounters(t, ctx, db)
				phases[ph] = [2]int64{frames, p1.walBytes - p0.walBytes}
			}
			after := writeCounters(t, ctx, db)
			b1, o1, _ := db.BatchStats().Snapshot()
			per := func(v int64) float64 { return float64(v) / n }
			t.Logf("%s, per accepted+delivered notification (%d notifications, %.2f deliveries each):", engine, n, 1.75)
			t.Logf("  group commits      %.3f (%.1f writes each)", per(int64(b1-b0)), float64(o1-o0)/float64(max(b1-b0, 1)))
			if engine == "sqlite" {
				t.Logf("  WAL pages          create %.2f  deliver %.2f  total %.2f (%.0f bytes at 4 KiB)",
					per(phases["create"][0]), per(phases["deliver"][0]), per(phases["create"][0]+phases["deliver"][0]),
					per(phases["create"][0]+phases["deliver"][0])*4096)
			} else {
				t.Logf("  WAL bytes          create %.0f  deliver %.0f  total %.0f (cluster-wide)",
					per(phases["create"][1]), per(phases["deliver"][1]), per(after.walBytes-before.walBytes))
			}
			_ = before
			for _, tb := range []string{"notifications", "deliveries"} {
				rows, idx := tableRowsIndexes(t, ctx, db, tb, "ntf_run_%")
				t.Logf("  %-14s rows %.2f x %d b-trees = %.2f entries", tb, per(rows), idx, per(rows*idx))
			}
			t.Logf("  updates: deliveries %.2f (the outcome of each delivery with its outbox entry; no claim: the outbox sends in the store), each rewriting the row and its changed partial-index entries", 1.75)
		})
	}
}

type writeCount struct{ walBytes int64 }

// tableRowsIndexes returns the rows of table whose notification id is like
// pattern, and the b-trees each row is in (table or primary key, and every
// index).
func tableRowsIndexes(t *testing.T, ctx context.Context, db *store.DB, table, pattern string) (int64, int64) {
	t.Helper()
	col := "notification_id"
	if table == "notifications" {
		col = "id"
	}
	var rows, idx int64
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, db.Rebind("SELECT count(*) FROM "+table+" WHERE "+col+" LIKE ?"), pattern).Scan(&rows); err != nil {
			return err
		}
		q := "SELECT 1 + count(*) FROM pg_indexes WHERE schemaname = current_schema() AND tablename = ?"
		if db.Dialect() != store.DialectPostgres {
			// WITHOUT ROWID tables keep rows in the primary key's b-tree,
			// which sqlite_master does not list as an index.
			q = "SELECT 1 + count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = ?"
		}
		return tx.QueryRowContext(ctx, db.Rebind(q), table).Scan(&idx)
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows, idx
}

// writeCounters reads PostgreSQL's WAL position (zero on SQLite).
func writeCounters(t *testing.T, ctx context.Context, db *store.DB) writeCount {
	t.Helper()
	var c writeCount
	if db.Dialect() != store.DialectPostgres {
		return c
	}
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT pg_current_wal_lsn() - '0/0'::pg_lsn`).Scan(&c.walBytes)
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sqliteExec(t *testing.T, ctx context.Context, db *store.DB, q string) {
	t.Helper()
	if err := db.InTx(ctx, func(tx *sql.Tx) error { _, err := tx.ExecContext(ctx, q); return err }); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// sqliteWALFrames returns the frames (pages) the WAL file in dir holds:
// with automatic checkpoints off it only grows.
func sqliteWALFrames(t *testing.T, dir string) int64 {
	t.Helper()
	wals, _ := filepath.Glob(filepath.Join(dir, "*-wal"))
	var frames int64
	for _, w := range wals {
		if fi, err := os.Stat(w); err == nil && fi.Size() > 32 {
			frames += (fi.Size() - 32) / (4096 + 24)
		}
	}
	return frames
}

// sqliteFramesByTree counts the WAL frames in dir from frame from on by
// the b-tree (table or index, from dbstat) their page belongs to.
func sqliteFramesByTree(t *testing.T, ctx context.Context, db *store.DB, dir string, from int64) map[string]int64 {
	t.Helper()
	tree := map[uint32]string{}
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT name, pageno FROM dbstat")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				name string
				page uint32
			)
			if err := rows.Scan(&name, &page); err != nil {
				return err
			}
			tree[page] = name
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	wals, _ := filepath.Glob(filepath.Join(dir, "*-wal"))
	out := map[string]int64{}
	for _, w := range wals {
		b, err := os.ReadFile(w)
		if err != nil {
			t.Fatal(err)
		}
		for off := 32 + from*(4096+24); off+24 <= int64(len(b)); off += 4096 + 24 {
			page := binary.BigEndian.Uint32(b[off:])
			name, ok := tree[page]
			if !ok {
				name = "(freelist or gone)"
			}
			out[name]++
		}
	}
	return out
}

func runNotifyWrites(t *testing.T, ctx context.Context, db *store.DB, prefix string, n int) {
	runNotifyWritesPhase(t, ctx, db, prefix, n, "create")
	runNotifyWritesPhase(t, ctx, db, prefix, n, "deliver")
}

// runNotifyWritesPhase creates n notifications (phase create) or finishes
// their deliveries as sent with an outbox entry (deliver), 32
// at a time, as concurrent requests and workers do.
func runNotifyWritesPhase(t *testing.T, ctx context.Context, db *store.DB, prefix string, n int, phase string) {
	t.Helper()
	now := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				id := fmt.Sprintf("ntf_%s_%08d", prefix, i)
				chs := []notify.Channel{notify.Email, notify.Push}
				if i%4 == 3 {
					chs = chs[:1]
				}
				if err := notifyWriteOne(ctx, db, id, chs, now, phase); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func notifyWriteOne(ctx context.Context, db *store.DB, id string, chs []notify.Channel, now time.Time, phase string) error {
	if phase == "create" {
		n := notify.Notification{ID: id, RequestHash: "h", UserID: "u_" + id[len(id)-3:], Type: "order.shipped", Category: notify.Orders,
			Data: json.RawMessage(`{"order":"#42"}`), CreatedAt: now}
		var ds []notify.Delivery
		for _, ch := range chs {
			ds = append(ds, notify.Delivery{NotificationID: id, Channel: ch, UserID: n.UserID, Category: notify.Orders,
				Provider: "outbox", Status: notify.StatusQueued, CreatedAt: now, UpdatedAt: now})
		}
		_, _, err := db.CreateNotification(ctx, n, ds)
		return err
	}
	for _, ch := range chs {
		// The outbox sends in the store, so the worker claims its
		// deliveries only in failover categories (critical by default),
		// which may call a backup outside; an orders delivery goes
		// straight to its conditional outcome.
		key := notify.DeliveryKey{NotificationID: id, Channel: ch}
		a := notify.Attempt{Key: key, Status: notify.StatusSent, Attempts: 1, At: now.Add(time.Millisecond),
			ProviderMessageID: "m_" + id,
			Outbox: &notify.OutboxEntry{NotificationID: id, Channel: ch, Attempt: 1, UserID: "u_" + id[len(id)-3:],
				To: "user@example.com", Subject: "Your order shipped", Body: "Order #42 is on its way.", CreatedAt: now}}
		if ok, err := db.FinishAttempt(ctx, a, nil); err != nil || !ok {
			return fmt.Errorf("finish %v: %v %v", key, ok, err)
		}
	}
	return nil
}
