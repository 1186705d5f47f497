package store

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// TestRollupThresholdMigration checks migration 0028 on both engines: a
// link stored before it, with few clicks and rollups that count them
// all, keeps its stats (read from the rollups, not its raw clicks added
// again), and a link made after it starts below the threshold.
func TestRollupThresholdMigration(t *testing.T) {
	t.Parallel()
	onEachEngineThrough(t, "0027_outbox_in_deliveries", func(t *testing.T, db *DB, _ string) {
		ctx := t.Context()
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		// Written in the SQL of 0027: two clicks and their rollups.
		if _, err := db.exec(ctx, `INSERT INTO links (id, code, url, owner, created_at, clicks) VALUES (1000, 'old', 'https://example.com', '', ?, 2)`, t0.UnixMicro()); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if _, err := db.exec(ctx, `INSERT INTO link_clicks (link_id, at, bot, reason, visitor, country) VALUES (1000, ?, 0, '', 'v', 'FR')`, t0.Add(time.Duration(i)*time.Minute).UnixMicro()); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range []struct {
			dim   shorten.Dim
			value string
		}{{shorten.DimSource, "link"}, {shorten.DimCountry, "FR"}} {
			if _, err := db.exec(ctx, `INSERT INTO link_rollups (link_id, hour, dim, value, humans, bots) VALUES (1000, ?, ?, ?, 2, 0)`, t0.Unix()/3600, int64(r.dim), r.value); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		h0 := t0.Unix() / 3600
		series, groups, err := db.LinkStats(ctx, 1000, h0, h0+1, 1, shorten.DimCountry, 10)
		if err != nil || len(series) != 1 || series[0].Humans != 2 || len(groups) != 1 || groups[0].Humans != 2 {
			t.Errorf("LinkStats after 0028 = %v, %v, %v; want 2 clicks from FR, counted once", series, groups, err)
		}
		out, _, err := db.CreateLinks(ctx, []shorten.NewLink{{URL: "https://example.com/new", CreatedAt: t0}}, func(int64) (string, error) { return "new", nil })
		if err != nil {
			t.Fatal(err)
		}
		for id, want := range map[int64]bool{1000: true, out[0].ID: false} {
			if got, err := db.rolledUp(ctx, id); err != nil || got != want {
				t.Errorf("link %d rolled up = %v, %v; want %v", id, got, err, want)
			}
		}
	})
}
