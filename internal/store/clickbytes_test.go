package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// TestClickBytes measures the bytes a stored click takes (its row and its
// index entry) on each engine, for the sizing in docs/links.md, and fails
// if it grows past the bound stated there. The clicks are SMS-like: a
// country, a language, a phone, one in ten with a referrer.
func TestClickBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		open  func(t *testing.T) *store.DB
		size  string // bytes of link_clicks and its index
		bound float64
	}{
		{"sqlite", openSQLite, `SELECT SUM(pgsize) FROM dbstat WHERE name IN ('link_clicks', 'link_clicks_link_at')`, 80},
		{"postgres", func(t *testing.T) *store.DB {
			return openPostgres(t, enginetest.PostgresSchema(t, enginetest.PostgresURL(t)))
		}, `SELECT pg_relation_size('link_clicks') + pg_relation_size('link_clicks_link_at')`, 155},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := tc.open(t)
			if _, err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			var nl []shorten.NewLink
			for i := range 100 {
				nl = append(nl, shorten.NewLink{URL: fmt.Sprintf("https://example.com/%d", i), CreatedAt: time.Now()})
			}
			links, _, err := db.CreateLinks(ctx, nl, func(id int64) (string, error) { return fmt.Sprintf("c%07d", id), nil })
			if err != nil {
				t.Fatal(err)
			}
			const n = 50_000
			t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
			countries := []string{"FR", "DE", "US", "GB", "IN", "BR"}
			batch := make([]shorten.Click, 0, 5000)
			for i := range n {
				d := shorten.Dimensions{Country: countries[i%6], Device: shorten.DeviceMobile, OS: []string{"ios", "android"}[i%2], Language: "fr"}
				if i%10 == 0 {
					d.Referrer = "news.example.com"
				}
				batch = append(batch, shorten.Click{LinkID: links[i%100].ID, At: t0.Add(time.Duration(i) * 400 * time.Millisecond),
					Visitor: fmt.Sprintf("%032x", i*7919), Dimensions: d})
				if len(batch) == cap(batch) {
					if err := db.RecordClicks(ctx, batch); err != nil {
						t.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			var bytes int64
			if err := db.QueryRowForTest(ctx, tc.size).Scan(&bytes); err != nil {
				t.Fatal(err)
			}
			per := float64(bytes) / n
			t.Logf("%s: %.1f bytes per click (row and index), %d clicks", tc.name, per, n)
			if per > tc.bound {
				t.Errorf("%s: %.1f bytes per click, over the %.0f docs/links.md states", tc.name, per, tc.bound)
			}
		})
	}
}
