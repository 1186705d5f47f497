package store_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// TestClickRetentionTwoNodes: two nodes' purges of old clicks run at once
// on one database, beside a flusher writing new clicks, as several nodes
// sharing PostgreSQL (or two processes on one SQLite file) do; every old
// click goes, exactly once, no new one does, and neither fails.
func TestClickRetentionTwoNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (a, b *store.DB)
	}{
		{"sqlite", func(t *testing.T) (*store.DB, *store.DB) {
			path := filepath.Join(t.TempDir(), "shared.db")
			return mustOpen(t, store.Options{URL: "file:" + path}), mustOpen(t, store.Options{URL: "file:" + path})
		}},
		{"postgres", func(t *testing.T) (*store.DB, *store.DB) {
			u := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
			return openPostgres(t, u), openPostgres(t, u)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			a, b := tc.open(t)
			if _, err := a.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			cutoff := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
			var nl []shorten.NewLink
			for i := range 30 {
				nl = append(nl, shorten.NewLink{URL: fmt.Sprintf("https://example.com/%d", i), CreatedAt: cutoff.Add(-90 * 24 * time.Hour)})
			}
			links, _, err := a.CreateLinks(ctx, nl, func(id int64) (string, error) { return fmt.Sprintf("c%d", id), nil })
			if err != nil {
				t.Fatal(err)
			}
			const old = 3000
			var batch []shorten.Click
			for i := range old {
				batch = append(batch, shorten.Click{LinkID: links[i%30].ID, At: cutoff.Add(-time.Duration(i+1) * time.Minute), Visitor: fmt.Sprintf("%032x", i)})
			}
			if err := a.RecordClicks(ctx, batch); err != nil {
				t.Fatal(err)
			}
			var (
				wg     sync.WaitGroup
				purged [2]int
			)
			for i, db := range []*store.DB{a, b} {
				wg.Go(func() {
					for next := int64(0); ; {
						n, nx, err := db.PurgeClicks(ctx, cutoff, next, 100)
						if err != nil {
							t.Errorf("PurgeClicks on node %d: %v", i, err)
							return
						}
						purged[i] += n
						if nx == 0 {
							return
						}
						next = nx
					}
				})
			}
			const fresh = 300
			wg.Go(func() { // the flusher goes on meanwhile
				for j := range 10 {
					var nb []shorten.Click
					for i := range fresh / 10 {
						nb = append(nb, shorten.Click{LinkID: links[(i+j)%30].ID, At: cutoff.Add(time.Duration(j*100+i) * time.Second), Visitor: fmt.Sprintf("%032x", i)})
					}
					if err := b.RecordClicks(ctx, nb); err != nil {
						t.Errorf("RecordClicks during the purge: %v", err)
						return
					}
				}
			})
			wg.Wait()
			if purged[0]+purged[1] != old {
				t.Errorf("the two nodes purged %d + %d clicks, want %d in all", purged[0], purged[1], old)
			}
			var left, kept int64
			for _, l := range links {
				for _, span := range []struct {
					from, to time.Time
					n        *int64
				}{{cutoff.Add(-100 * 24 * time.Hour), cutoff, &left}, {cutoff, cutoff.Add(24 * time.Hour), &kept}} {
					// Under an hour a bucket counts raw clicks; whole
					// hours come from the rollups, which the purge keeps.
					buckets, _, err := a.LinkClicks(ctx, l.ID, span.from, span.to, 59*time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					for _, bk := range buckets {
						*span.n += bk.Human + bk.Bot
					}
				}
			}
			if left != 0 || kept != fresh {
				t.Errorf("%d old clicks left, %d new kept; want 0 and %d", left, kept, fresh)
			}
		})
	}
}
