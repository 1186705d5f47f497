package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// BenchmarkLinkClicks is GET /v1/links/{code}/clicks?since=24h on SQLite
// for a link clicked 5,000 times an hour for a day (one in 20 a bot's):
// buckets under an hour group the raw clicks (as every read did before the
// rollups answered whole hours), hourly buckets read the rollups with both
// partial hours raw, and with the last hour read whole (what the service
// asks for: nothing is recorded after now). The bot reasons of whole hours
// come from the reason rollups in every case. One op is one read.
func BenchmarkLinkClicks(b *testing.B) {
	db, links := oneLinkStore(b)
	ctx := b.Context()
	const perHour, hours = 5000, 25
	now := time.Date(2026, 7, 2, 10, 30, 0, 0, time.UTC)
	start := now.Add(-hours * time.Hour)
	clicks := make([]shorten.Click, 0, 4096)
	for i := range perHour * hours {
		c := shorten.Click{LinkID: links[0].ID, At: start.Add(time.Duration(i) * time.Hour / perHour),
			Visitor: fmt.Sprintf("%032x", i%977), Dimensions: shorten.Dimensions{Device: shorten.DeviceDesktop, OS: "linux"}}
		if i%20 == 0 {
			c.Bot, c.Reason = true, shorten.BotPreview
		}
		if clicks = append(clicks, c); len(clicks) == cap(clicks) {
			if err := db.RecordClicks(ctx, clicks); err != nil {
				b.Fatal(err)
			}
			clicks = clicks[:0]
		}
	}
	if err := db.RecordClicks(ctx, clicks); err != nil {
		b.Fatal(err)
	}
	since := now.Add(-24 * time.Hour)
	for _, c := range []struct {
		name   string
		until  time.Time
		bucket time.Duration
	}{
		{"raw", now, 59 * time.Minute},
		{"rollups", now, time.Hour},
		{"rollups-last-hour-whole", now.Truncate(time.Hour).Add(time.Hour), time.Hour},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := db.LinkClicks(ctx, links[0].ID, since, c.until, c.bucket); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
