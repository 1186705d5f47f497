package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestDigestTimelineInBrowser opens a digest message's timeline in the
// dashboard: it lists the events the digest gathered, and an event's
// timeline names the digest it went into.
func TestDigestTimelineInBrowser(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, testConfig(t))
	var k struct {
		Key string `json:"key"`
	}
	apiCall(t, n, "POST", "/v1/keys", "", map[string]any{"name": "dashboard", "scopes": []string{"admin"}}, http.StatusCreated, &k)
	apiCall(t, n, "PUT", "/v1/templates/news", k.Key, map[string]any{"category": "marketing",
		"channels": map[string]any{"default": map[string]any{"en": map[string]any{"subject": "{count} news", "body": "{count} news:\n{items}"}}},
		"digest":   map[string]any{"window": "1s", "item": "- {title}"}}, http.StatusOK, nil)
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	for _, title := range []string{"a", "b"} {
		apiCall(t, n, "POST", "/v1/notifications", k.Key, map[string]any{"user_id": "dora", "type": "news",
			"data": map[string]any{"title": title}, "channels": []string{"email"}}, http.StatusAccepted, &acc)
	}
	var msg string
	enginetest.EventuallyNil(t, 15*time.Second, "the digest sent", func() error {
		var out outboxBody
		apiCall(t, n, "GET", "/v1/outbox?user_id=dora", k.Key, nil, http.StatusOK, &out)
		if len(out.Items) == 1 {
			msg = out.Items[0].NotificationID
		}
		return enginetest.State(msg != "", "%s", fmt.Sprint(out.Items))
	})

	b.run(t, "sign in", chromedp.Navigate(n.httpURL+"/ui/"), chromedp.WaitVisible(chromedp.ID("api-key")),
		chromedp.SetValue(chromedp.ID("api-key"), k.Key), chromedp.Click(chromedp.CSS("#signin button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("nav")))
	showPage(b, t, "notifications", "#search-user")
	b.run(t, "open the digest message", chromedp.SetValue(chromedp.CSS("input[name=id]"), msg),
		chromedp.Click(chromedp.CSS("form:has(input[name=id]) button")),
		waitText("#notifications tr.expand", "Digest of 2 events"),
		waitText("#notifications tr.expand", acc.NotificationID),
		waitText("#notifications tr.expand", "attempt 1: handed to the outbox"))
	b.screenshot(t, "digest-message")
	b.run(t, "open an event", chromedp.SetValue(chromedp.CSS("input[name=id]"), acc.NotificationID),
		chromedp.Click(chromedp.CSS("form:has(input[name=id]) button")),
		waitText("#notifications tr.expand", "Gathered into a digest"),
		waitText("#notifications tr.expand", msg),
		waitText("#notifications tr.expand", "suppressed: digested"))
	b.noErrors(t, "notifications")
}
