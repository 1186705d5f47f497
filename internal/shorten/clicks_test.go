package shorten_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// TestClickRetention: the purge job deletes raw clicks older than
// ClickRetention, counts them, and leaves the rollups, so the stats of the
// purged period are unchanged.
func TestClickRetention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		retention time.Duration
		purged    int
	}{
		{"forever by default", 0, 0},
		{"48h", 48 * time.Hour, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var counted int
			b := setup(t, func(o *shorten.Options) {
				o.ClickRetention = tc.retention
				o.Metrics = &shorten.Metrics{ClicksPurged: func(n int) { counted += n }} // Purge runs on this goroutine
			})
			ctx := t.Context()
			admin := shorten.Caller{Admin: true}
			l := b.create(t, shorten.CreateRequest{URL: "https://example.com/page"})
			start := b.clock.Now()
			hits := func(n int) {
				t.Helper()
				for range n {
					b.svc.RecordHit(shorten.Hit{LinkID: l.ID, UserAgent: browser, Client: "198.51.100.7"})
				}
				if err := b.svc.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			hits(3)
			b.clock.Advance(24 * time.Hour)
			hits(2)
			stats := func() shorten.LinkStats {
				t.Helper()
				s, err := b.svc.Stats(ctx, admin, l.Code, start.Add(-time.Hour), b.clock.Now().Add(time.Hour), 24*time.Hour, shorten.DimSource)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			before := stats()
			if n, err := b.svc.PurgeClicks(ctx); err != nil || n != 0 {
				t.Fatalf("PurgeClicks within the retention = %d, %v; want 0", n, err)
			}
			b.clock.Advance(30 * time.Hour) // the first 3 clicks are 54h old, the next 2 30h
			n, err := b.svc.PurgeClicks(ctx)
			if err != nil || n != tc.purged || counted != tc.purged {
				t.Fatalf("PurgeClicks = %d, %v (metric %d); want %d", n, err, counted, tc.purged)
			}
			after := stats()
			if before.Totals != after.Totals || len(before.Series) != len(after.Series) {
				t.Errorf("stats after the purge = %+v, want them unchanged: %+v", after, before)
			}
			// Buckets under an hour count raw clicks; hourly ones read the
			// rollups, which the purge keeps.
			count := func(bucket time.Duration) int64 {
				series, err := b.svc.Clicks(ctx, admin, l.Code, start.Add(-time.Hour), bucket)
				if err != nil {
					t.Fatal(err)
				}
				var n int64
				for _, bk := range series.Buckets {
					n += bk.Human + bk.Bot
				}
				return n
			}
			if left := count(30 * time.Minute); left != int64(5-tc.purged) {
				t.Errorf("%d raw clicks left, want %d", left, 5-tc.purged)
			}
			if hourly := count(time.Hour); hourly != 5 {
				t.Errorf("%d clicks in hourly buckets after the purge, want 5: the rollups are kept", hourly)
			}
			if got, err := b.svc.Get(ctx, admin, l.Code); err != nil || got.Clicks != 5 {
				t.Errorf("link clicks after the purge = %d, %v; want 5: the counters are kept", got.Clicks, err)
			}
		})
	}
}

// TestOnRecorded: each recorded batch, bots' hits included, is handed to
// OnRecorded with its classification and dimensions; an empty flush hands
// nothing over.
func TestOnRecorded(t *testing.T) {
	t.Parallel()
	var batches [][]shorten.Click // OnRecorded runs on the flushing goroutine
	b := setup(t, func(o *shorten.Options) {
		o.OnRecorded = func(clicks []shorten.Click) { batches = append(batches, clicks) }
	})
	ctx := t.Context()
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com/page"})
	b.svc.RecordHit(shorten.Hit{LinkID: l.ID, Code: l.Code, UserAgent: browser, Client: "198.51.100.7",
		HitDetails: shorten.HitDetails{AcceptLanguage: "fr-FR", Referer: "https://t.co/x"}})
	b.svc.RecordHit(shorten.Hit{LinkID: l.ID, Code: l.Code, UserAgent: "curl/8.5.0", Client: "198.51.100.8"})
	if err := b.svc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(batches) != 1 || len(batches[0]) != 2 {
		t.Fatalf("OnRecorded got %d batches (%+v), want one of 2 hits", len(batches), batches)
	}
	human, bot := batches[0][0], batches[0][1]
	if human.Bot || human.LinkID != l.ID || human.Code != l.Code || human.Language != "fr" || human.Referrer != "t.co" || human.At.IsZero() {
		t.Errorf("human hit = %+v", human)
	}
	if !bot.Bot || bot.Reason != "tool" {
		t.Errorf("bot hit = %+v, want a tool's", bot)
	}
	if err := b.svc.Flush(ctx); err != nil || len(batches) != 1 {
		t.Errorf("an empty flush: %v, %d batches; want none handed over", err, len(batches))
	}
}
