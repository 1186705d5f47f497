package store

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// TestClickSeriesKeepsClicksBeforeRollups checks migration 0026 on both
// engines: clicks stored before the rollups existed (no link_rollups rows)
// get their source rollups, so a series of whole hours, read from the
// rollups, still counts them; hours that already have rollups are left as
// they are.
func TestClickSeriesKeepsClicksBeforeRollups(t *testing.T) {
	t.Parallel()
	onEachEngineThrough(t, "0025_email_tracking", func(t *testing.T, db *DB, _ string) {
		ctx := t.Context()
		// Written in the SQL of 0025: the code of today writes columns
		// later migrations add.
		const id = 1
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		if _, err := db.exec(ctx, `INSERT INTO links (id, code, url, owner, created_at, clicks, bot_hits) VALUES (?, 'series', 'https://example.com', '', ?, 3, 1)`,
			id, t0.UnixMicro()); err != nil {
			t.Fatal(err)
		}
		// Two hours of clicks stored as a release before the rollups
		// stored them: raw rows only (one from a QR code, one a bot's).
		for i, c := range []struct {
			at          time.Time
			bot, source int
		}{{t0, 0, 0}, {t0.Add(time.Minute), 1, 0}, {t0.Add(time.Hour), 0, 1}} {
			reason := ""
			if c.bot == 1 {
				reason = shorten.BotPreview
			}
			if _, err := db.exec(ctx, `INSERT INTO link_clicks (link_id, at, bot, reason, visitor, source) VALUES (?, ?, ?, ?, ?, ?)`,
				id, c.at.UnixMicro(), c.bot, reason, string(rune('a'+i)), c.source); err != nil {
				t.Fatal(err)
			}
		}
		// Then a click recorded with its rollups, in a later hour (its
		// source rollup is what the migration and the series read).
		later := t0.Add(5 * time.Hour)
		if _, err := db.exec(ctx, `INSERT INTO link_clicks (link_id, at, bot, reason, visitor) VALUES (?, ?, 0, '', 'd')`, id, later.UnixMicro()); err != nil {
			t.Fatal(err)
		}
		if _, err := db.exec(ctx, `INSERT INTO link_rollups (link_id, hour, dim, value, humans, bots) VALUES (?, ?, ?, 'link', 1, 0)`,
			id, later.Unix()/3600, int64(shorten.DimSource)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		got, reasons, err := db.LinkClicks(ctx, id, t0, t0.Add(24*time.Hour), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		want := []shorten.ClickBucket{{Start: t0, Human: 1, Bot: 1}, {Start: t0.Add(time.Hour), Human: 1}, {Start: t0.Add(5 * time.Hour), Human: 1}}
		if !slices.EqualFunc(want, got, func(w, g shorten.ClickBucket) bool {
			return w.Start.Equal(g.Start) && w.Human == g.Human && w.Bot == g.Bot
		}) {
			t.Errorf("LinkClicks after 0026 = %v, want %v", got, want)
		}
		if reasons[shorten.BotPreview] != 1 || len(reasons) != 1 {
			t.Errorf("reasons after 0026 = %v, want one preview", reasons)
		}
		series, _, err := db.LinkStats(ctx, id, t0.Unix()/3600, t0.Unix()/3600+24, 1, shorten.DimSource, 10)
		if err != nil || len(series) != 3 {
			t.Errorf("LinkStats after 0026 = %v, %v; want three hours", series, err)
		}
	})
}
