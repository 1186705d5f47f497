package store

import (
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
)

// TestFirstLinkCreatedFrom bisects links created a minute apart, every
// seventh by a node whose clock is 40 minutes behind, on both engines: the
// id found is created at t or later, every later link within the skew of
// t, and no later than the first link past t plus the skew.
func TestFirstLinkCreatedFrom(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			var db *DB
			if engine == "sqlite" {
				db = openMigrated(t, Options{URL: "file:" + filepath.Join(t.TempDir(), "s.db")})
			} else {
				db = openPostgresForTest(t, enginetest.PostgresURL(t))
			}
			ctx := t.Context()
			call := func(from, at int64) int64 {
				t.Helper()
				var end int64
				err := db.InTx(ctx, func(tx *sql.Tx) (err error) {
					end, err = db.firstLinkCreatedFrom(ctx, tx, from, at)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return end
			}
			if got := call(0, 0); got != math.MaxInt64 {
				t.Errorf("on no links = %d, want MaxInt64", got)
			}
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var nl []shorten.NewLink
			for i := range 1000 {
				at := base.Add(time.Duration(i) * time.Minute)
				if i%7 == 3 {
					at = at.Add(-40 * time.Minute)
				}
				nl = append(nl, shorten.NewLink{URL: fmt.Sprintf("https://example.com/%d", i), CreatedAt: at})
			}
			links, _, err := db.CreateLinks(ctx, nl, func(id int64) (string, error) { return fmt.Sprintf("c%d", id), nil })
			if err != nil {
				t.Fatal(err)
			}
			first, last := links[0].ID, links[len(links)-1].ID
			for _, minute := range []int{0, 1, 3, 4, 100, 500, 998, 999} {
				at := base.Add(time.Duration(minute) * time.Minute).UnixMicro()
				end := call(first, at)
				found := false
				for i, l := range links {
					switch {
					case l.ID == end:
						found = true
						if l.CreatedAt.UnixMicro() < at {
							t.Errorf("minute %d: link %d created %v, before t", minute, end, l.CreatedAt)
						}
					case l.ID > end && l.CreatedAt.UnixMicro() < at-purgeClockSkew.Microseconds():
						t.Errorf("minute %d: link %d after the end %d is older than the skew allows", minute, l.ID, end)
					case l.ID < end && i >= minute+41:
						t.Errorf("minute %d: end %d, past link %d created more than the skew after t", minute, end, l.ID)
					}
				}
				if !found {
					t.Errorf("minute %d: end %d is no link", minute, end)
				}
			}
			if got := call(first, base.Add(1000*time.Minute).UnixMicro()); got != math.MaxInt64 {
				t.Errorf("past the newest link = %d, want MaxInt64", got)
			}
			if got := call(last+1, 0); got != math.MaxInt64 {
				t.Errorf("from past the newest link = %d, want MaxInt64", got)
			}
		})
	}
}
