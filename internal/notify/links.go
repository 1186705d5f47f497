package notify

import (
	"context"
	"time"
)

// LinkShortener turns the links of a notification's message into tracked
// short links owned by that notification, and reports their clicks.
// internal/shorten implements it, adapted in cmd/sluice (this package
// imports neither).
type LinkShortener interface {
	// ShortenLinks returns body with every link replaced by the
	// notification's short link for it (one per notification and URL, so
	// a retry reuses the same ones). A link that cannot be shortened stays
	// as it is: the message never depends on the shortener.
	ShortenLinks(ctx context.Context, notificationID, body string) string
	// Links returns the notification's short links and their clicks.
	Links(ctx context.Context, notificationID string) ([]Link, error)
}

// Link is one tracked short link of a notification, with its clicks.
type Link struct {
	Code         string
	ShortURL     string
	URL          string
	Clicks       int64 // human clicks
	BotHits      int64 // link previews, scanners, crawlers, HEAD
	FirstClickAt time.Time
	Conversions  int64 // recorded against its click ids (POST /v1/conversions)
}

// ShortenSMSLinks is the Rewriter that replaces links in SMS bodies by
// tracked short links, giving the shortener at most timeout (if zero, two
// seconds) before the message goes out with its long links.
func ShortenSMSLinks(ls LinkShortener, timeout time.Duration) Rewriter {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return RewriterFunc(func(ctx context.Context, m Message) (Message, error) {
		if m.Channel != SMS {
			return m, nil
		}
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		m.Body = ls.ShortenLinks(sctx, m.NotificationID, m.Body)
		return m, nil
	})
}
