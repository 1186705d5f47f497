package store_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// BenchmarkPurgeSweepNothingOld is a click retention sweep that finds
// nothing to delete: 300,000 clicked links made over 90 days, the cutoff
// before the first, as every sweep's end past the last link older than its
// cutoff is. One op is one whole sweep, each with a cutoff of its own. On
// PostgreSQL it needs SLUICE_TEST_POSTGRES_URL.
func BenchmarkPurgeSweepNothingOld(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres"} {
		b.Run(engine, func(b *testing.B) {
			db := benchStore(b, engine)
			ctx := b.Context()
			const nLinks, window = 300_000, 90 * 24 * time.Hour
			t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
			for lo := 0; lo < nLinks; lo += 1000 {
				nl := make([]shorten.NewLink, 1000)
				for i := range nl {
					nl[i] = shorten.NewLink{URL: fmt.Sprintf("https://shop.example.com/o/%d", lo+i),
						CreatedAt: t0.Add(window / nLinks * time.Duration(lo+i))}
				}
				if _, _, err := db.CreateLinks(ctx, nl, func(id int64) (string, error) { return fmt.Sprintf("t%d", id), nil }); err != nil {
					b.Fatal(err)
				}
			}
			if err := db.InTx(ctx, func(tx *sql.Tx) error { _, err := tx.ExecContext(ctx, `UPDATE links SET clicks = 1`); return err }); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				before := t0.Add(-time.Duration(i+1) * time.Second)
				for from := int64(0); ; {
					n, next, err := db.PurgeClicks(ctx, before, from, 1000)
					if err != nil || n != 0 {
						b.Fatalf("PurgeClicks = %d, %v; want nothing deleted", n, err)
					}
					if next == 0 {
						break
					}
					from = next
				}
			}
		})
	}
}
