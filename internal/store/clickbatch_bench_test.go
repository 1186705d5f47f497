package store_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// BenchmarkRecordClicks is the click flusher's write on SQLite: batches of
// 4,096 browser clicks (the flusher's batch under load) on one link, as
// wrk against one slug makes them. One op is one click.
func BenchmarkRecordClicks(b *testing.B) {
	db, links := oneLinkStore(b)
	ctx := b.Context()
	const batch = 4096
	clicks := make([]shorten.Click, batch)
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	d := shorten.Dimensions{Device: shorten.DeviceDesktop, OS: "linux"}
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		for i := range clicks {
			clicks[i] = shorten.Click{LinkID: links[0].ID, At: t0.Add(time.Duration(done+i) * 20 * time.Microsecond),
				Visitor: "0f1e2d3c4b5a69788796a5b4c3d2e1f0", Dimensions: d}
		}
		if err := db.RecordClicks(ctx, clicks[:min(batch, b.N-done)]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStore returns a new migrated store on engine, "sqlite" or
// "postgres" (a schema of its own; it needs SLUICE_TEST_POSTGRES_URL).
func benchStore(b *testing.B, engine string) *store.DB {
	b.Helper()
	opts := store.Options{DataDir: filepath.Join(b.TempDir(), "data"), MaxOpenConns: 4}
	if engine == "postgres" {
		opts.URL = enginetest.PostgresSchema(b, enginetest.PostgresURL(b))
	}
	db := mustOpen(b, opts)
	if _, err := db.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	return db
}

// oneLinkStore returns a new migrated SQLite store holding one link.
func oneLinkStore(b *testing.B) (*store.DB, []shorten.Link) {
	b.Helper()
	db := mustOpen(b, store.Options{DataDir: filepath.Join(b.TempDir(), "data")})
	if _, err := db.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	links, _, err := db.CreateLinks(b.Context(), []shorten.NewLink{{URL: "https://example.com/page", CreatedAt: time.Now()}},
		func(id int64) (string, error) { return fmt.Sprintf("c%d", id), nil })
	if err != nil {
		b.Fatal(err)
	}
	return db, links
}

// BenchmarkRecordClicksLongTail is the flusher's write when most clicks
// are on links clicked a few times (links sent by SMS or email, each
// opened once or twice): batches of 4,096 clicks, each on a link of its
// own among 100,000, a few hours after it was made, with the dimensions
// of phones in a few countries. One op is one click. On PostgreSQL it
// needs SLUICE_TEST_POSTGRES_URL.
func BenchmarkRecordClicksLongTail(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres"} {
		b.Run(engine, func(b *testing.B) {
			db := benchStore(b, engine)
			ctx := b.Context()
			const nLinks, batch = 100_000, 4096
			t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
			var links []shorten.Link
			for lo := 0; lo < nLinks; lo += 1000 {
				nl := make([]shorten.NewLink, 1000)
				for i := range nl {
					nl[i] = shorten.NewLink{URL: fmt.Sprintf("https://shop.example.com/o/%d", lo+i), CreatedAt: t0}
				}
				ls, _, err := db.CreateLinks(ctx, nl, func(id int64) (string, error) { return fmt.Sprintf("t%d", id), nil })
				if err != nil {
					b.Fatal(err)
				}
				links = append(links, ls...)
			}
			countries := []string{"US", "GB", "DE", "FR", "IN", "BR"}
			clicks := make([]shorten.Click, batch)
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				for i := range clicks {
					n := done + i
					clicks[i] = shorten.Click{LinkID: links[n%nLinks].ID, At: t0.Add(time.Duration(n%nLinks)*time.Second + time.Duration(n/nLinks)*time.Hour),
						Visitor: fmt.Sprintf("%032x", n), Dimensions: shorten.Dimensions{Device: shorten.DeviceMobile, OS: "android",
							Country: countries[n%len(countries)], Language: "en"}}
				}
				if err := db.RecordClicks(ctx, clicks[:min(batch, b.N-done)]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			var rows int64
			err := db.InTx(ctx, func(tx *sql.Tx) error {
				return tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM link_rollups").Scan(&rows)
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(rows)/float64(b.N), "rollups/click")
		})
	}
}
