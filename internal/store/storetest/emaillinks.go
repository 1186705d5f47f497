package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// emailLinks pins the email tracking store: one link per notification and
// URL whose sent_at moves on every attempt, human and bot hits counted
// apart, the first human hit kept, links gone with their notification.
func (s suite) emailLinks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	n, ds := newNotification("ntf_mail", "", "u1", t0, notify.Email)
	mustCreate(t, db, n, ds)

	put, err := db.PutEmailLinks(ctx, []notify.EmailLink{
		{Token: "tok_aaaaaaaaaaaa", NotificationID: n.ID, URL: "https://shop.test/a", SentAt: t0},
		{Token: "tok_cccccccccccc", NotificationID: n.ID, URL: "https://shop.test/c", SentAt: t0}})
	if err != nil || len(put) != 2 || put[0].Token != "tok_aaaaaaaaaaaa" || !put[0].SentAt.Equal(t0) || put[1].URL != "https://shop.test/c" {
		t.Fatalf("PutEmailLinks = %+v, %v", put, err)
	}
	first := put[0]
	retry, err := db.PutEmailLinks(ctx, []notify.EmailLink{
		{Token: "tok_bbbbbbbbbbbb", NotificationID: n.ID, URL: "https://shop.test/a", SentAt: t0.Add(time.Minute)},
		{Token: "tok_pixelpixelpi", NotificationID: n.ID, SentAt: t0}})
	if err != nil || len(retry) != 2 || retry[0].Token != first.Token || !retry[0].SentAt.Equal(t0.Add(time.Minute)) || !retry[1].Pixel() {
		t.Fatalf("PutEmailLinks again = %+v, %v; want the first token with the retry's sent_at, and the pixel", retry, err)
	}
	for _, h := range []struct {
		bot bool
		at  time.Time
	}{{true, t0.Add(time.Second)}, {false, t0.Add(time.Hour)}, {false, t0.Add(2 * time.Hour)}} {
		if err := db.RecordEmailHit(ctx, first.Token, h.bot, "early", h.at); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.EmailLink(ctx, first.Token)
	if err != nil || got.Hits != 2 || got.BotHits != 1 || !got.FirstAt.Equal(t0.Add(time.Hour)) || got.URL != "https://shop.test/a" {
		t.Errorf("EmailLink = %+v, %v; want 2 hits, 1 bot hit, first at the first human hit", got, err)
	}
	links, err := db.EmailLinks(ctx, n.ID)
	if err != nil || len(links) != 3 || !links[0].Pixel() || links[1].Token != first.Token {
		t.Errorf("EmailLinks = %+v, %v; want the pixel and the two links", links, err)
	}
	if _, err := db.EmailLink(ctx, "tok_nonenonenone"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("EmailLink(unknown) = %v, want NotFound", err)
	}
	if _, err := db.DeleteNotificationsBefore(ctx, t0.Add(time.Second), 10); err != nil {
		t.Fatal(err)
	}
	if links, err := db.EmailLinks(ctx, n.ID); err != nil || len(links) != 0 {
		t.Errorf("EmailLinks after the notification's purge = %+v, %v; want none", links, err)
	}
}
