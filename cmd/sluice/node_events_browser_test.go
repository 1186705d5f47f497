package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestEventSubscriptionsInBrowser opens the dashboard's event
// subscriptions page where a person would look for a failing endpoint: a
// subscription disabled after its failure shows as disabled with the
// reason and the last error; Recover (once the receiver is back) resends
// what it missed; a new subscription made with the form shows its secret
// once.
func TestEventSubscriptionsInBrowser(t *testing.T) {
	b := newBrowser(t)
	cfg := eventsConfig(t)
	n := startNode(t, cfg)
	var k struct {
		Key string `json:"key"`
	}
	apiCall(t, n, "POST", "/v1/keys", "", map[string]any{"name": "dashboard", "scopes": []string{"admin"}}, http.StatusCreated, &k)
	userHook := enginetest.StartWebhookReceiver(t, http.StatusNoContent)
	apiCall(t, n, "PUT", "/v1/users/u1/settings", k.Key, map[string]any{"contacts": map[string]string{"webhook_url": userHook.URL + "/hook"}}, http.StatusOK, nil)
	recv := newEventReceiver(t)
	recv.set(func(h *eventReceiver) { h.status = http.StatusServiceUnavailable })
	var sub eventSubBody
	apiCall(t, n, "POST", "/v1/event-subscriptions", k.Key, map[string]any{"url": recv.URL + "/events", "events": []string{"delivery.sent"},
		"disable_after_failures": 1}, http.StatusCreated, &sub)
	start := time.Now().UTC().Add(-time.Second)
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	apiCall(t, n, "POST", "/v1/notifications", k.Key, map[string]any{"user_id": "u1", "type": "payment_failed", "channels": []string{"webhook"}},
		http.StatusAccepted, &acc)
	enginetest.EventuallyNil(t, 10*time.Second, "the subscription disabled", func() error {
		var s eventSubBody
		apiCall(t, n, "GET", "/v1/event-subscriptions/"+sub.ID, k.Key, nil, http.StatusOK, &s)
		return enginetest.State(s.Status == "disabled", "%+v", s)
	})

	b.run(t, "sign in", chromedp.Navigate(n.httpURL+"/ui/"), chromedp.WaitVisible(chromedp.ID("api-key")),
		chromedp.SetValue(chromedp.ID("api-key"), k.Key), chromedp.Click(chromedp.CSS("#signin button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("nav")))
	showPage(b, t, "event-subscriptions", "#event-subscriptions")
	row := fmt.Sprintf(`#event-subscriptions tr[data-id=%q]`, sub.ID)
	b.run(t, "see the disabled subscription", waitText(row, "disabled"), waitText(row, "1 consecutive failed attempts"),
		waitText(row, "503"))
	b.screenshot(t, "events-01-disabled")
	b.noErrors(t, "event subscriptions")

	key, _ := decodeSecretForTest(sub.Secret)
	recv.set(func(h *eventReceiver) { h.status = http.StatusNoContent; h.key = key })
	b.run(t, "recover it", eval(`window.prompt = () => `+fmt.Sprintf("%q", start.Format(time.RFC3339Nano))),
		chromedp.Click(chromedp.CSS(row+" button.recover")), waitText("#subscription-result", "Queued 1 event"), waitText(row, "enabled"))
	enginetest.EventuallyNil(t, 10*time.Second, "the recovered event", func() error {
		_, _, ok := recv.find("delivery.sent", "notification_id", acc.NotificationID)
		return enginetest.State(ok, "%s", "")
	})

	b.run(t, "subscribe with the form", chromedp.SetValue(chromedp.ID("subscription-url"), "https://hooks.example.com/sluice"),
		chromedp.Click(chromedp.CSS("#subscription-form button[type=submit]")), waitText("#subscription-secret", "whsec_"),
		waitText("#event-subscriptions", "hooks.example.com"))
	b.screenshot(t, "events-02-created")
	b.noErrors(t, "event subscriptions after changes")
}
