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
		out, _, err := db.CreateLinks(ctx, []shorten.NewLink{{URL: "https://example.com", CreatedAt: time.Now()}}, func(int64) (string, error) { return "series", nil })
		if err != nil {
			t.Fatal(err)
		}
		id := out[0].ID
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
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
		// Then clicks recorded with their rollups, in a later hour.
		if err := db.RecordClicks(ctx, []shorten.Click{{LinkID: id, At: t0.Add(5 * time.Hour), Visitor: "d"}}); err != nil {
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
