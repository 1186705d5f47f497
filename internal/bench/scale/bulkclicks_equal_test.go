package scale_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// TestBulkClicksMatchStore fills the same clicks into two stores, one by
// the bulk SQL fill and one through RecordClicks in the same batches, and
// compares link_clicks (in insertion order), link_rollups and the links'
// counters row by row, on both engines.
func TestBulkClicksMatchStore(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			open := func() *store.DB {
				opts := store.Options{DataDir: t.TempDir(), MaxOpenConns: 4}
				if engine == "postgres" {
					opts.URL = enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
				}
				db, err := store.Open(ctx, opts)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				if _, err := db.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
				return db
			}
			bulk, flushed := open(), open()
			const nLinks, nClicks, batch = 40, 5000, 1500 // about 115 clicks a link: most reach store.RollUpAt inside a batch
			now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			from := now.Add(-window)
			var firstID int64
			for _, db := range []*store.DB{bulk, flushed} {
				ls := make([]shorten.NewLink, nLinks)
				for i := range ls {
					ls[i] = shorten.NewLink{URL: "https://shop.example.com/p/" + strconv.Itoa(i), Owner: "scale", CreatedAt: from.Add(time.Duration(i) * window / nLinks)}
				}
				out, _, err := db.CreateLinks(ctx, ls, func(id int64) (string, error) { return "s" + strconv.FormatInt(id, 36), nil })
				if err != nil {
					t.Fatal(err)
				}
				firstID = out[0].ID
			}
			// Two steps, so that the second adds to rows the first made.
			steps := [][2]int64{{0, nClicks / 2}, {nClicks / 2, nClicks}}
			for _, st := range steps {
				span := bulkSpan{lo: st[0], hi: st[1], stepLo: st[0], stepHi: st[1], firstID: firstID, links: nLinks,
					from: from.UnixMicro(), linkStep: window.Microseconds() / nLinks, now: now.UnixMicro()}
				if err := bulkClicks(ctx, bulk, engine, span, batch); err != nil {
					t.Fatal(err)
				}
			}
			// The same clicks, read back in insertion order, through the
			// store in the bulk fill's batches.
			clicks := readClicks(ctx, t, bulk, engine)
			if len(clicks) != nClicks {
				t.Fatalf("bulk fill wrote %d clicks, want %d", len(clicks), nClicks)
			}
			for _, st := range steps {
				for lo := st[0]; lo < st[1]; lo += batch {
					if err := flushed.RecordClicks(ctx, clicks[lo:min(st[1], lo+batch)]); err != nil {
						t.Fatal(err)
					}
				}
			}
			order := "rowid"
			if engine == "postgres" {
				order = "ctid"
			}
			for _, q := range []string{
				"SELECT link_id, at, bot, reason, visitor, visitor_id, target, source, country, device, os, language, referrer, click_id FROM link_clicks ORDER BY " + order,
				"SELECT link_id, hour, dim, value, humans, bots FROM link_rollups ORDER BY link_id, hour, dim, value",
				"SELECT id, clicks, bot_hits, first_click_at, rolled_up FROM links ORDER BY id",
			} {
				a, b := dump(ctx, t, bulk, q), dump(ctx, t, flushed, q)
				if len(a) == 0 {
					t.Fatalf("no rows: %s", q)
				}
				if !reflect.DeepEqual(a, b) {
					for i := range min(len(a), len(b)) {
						if a[i] != b[i] {
							t.Fatalf("%s\nrow %d: bulk %s, store %s (bulk %d rows, store %d)", q, i, a[i], b[i], len(a), len(b))
						}
					}
					t.Fatalf("%s: bulk %d rows, store %d", q, len(a), len(b))
				}
			}
		})
	}
}

var deviceName, osName = names(deviceCode), names(osCode)

func names(m map[string]int) map[int64]string {
	out := map[int64]string{}
	for k, v := range m {
		out[int64(v)] = k
	}
	return out
}

func readClicks(ctx context.Context, t *testing.T, db *store.DB, engine string) []shorten.Click {
	order := "rowid"
	if engine == "postgres" {
		order = "ctid"
	}
	var out []shorten.Click
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT link_id, at, bot, reason, visitor_id, target, source, country, device, os, language, referrer FROM link_clicks ORDER BY "+order)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				c                 shorten.Click
				at, bot, src, dev int64
				osc               int64
				vid               []byte
			)
			if err := rows.Scan(&c.LinkID, &at, &bot, &c.Reason, &vid, &c.Target, &src, &c.Dimensions.Country, &dev, &osc, &c.Dimensions.Language, &c.Dimensions.Referrer); err != nil {
				return err
			}
			c.At, c.Bot, c.Visitor = time.UnixMicro(at), bot == 1, hex.EncodeToString(vid)
			c.Dimensions.Source, c.Dimensions.Device, c.Dimensions.OS = shorten.Source(src), deviceName[dev], osName[osc]
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dump is q's rows, each formatted as one string.
func dump(ctx context.Context, t *testing.T, db *store.DB, q string) []string {
	var out []string
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("%v", vals))
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
