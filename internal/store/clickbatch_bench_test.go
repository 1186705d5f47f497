package store_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

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
