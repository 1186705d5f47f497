package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// apiCall sends a JSON request with key (none when empty) and decodes the
// answer into out (when not nil), failing the test on an unexpected status.
func apiCall(t *testing.T, n *testNode, method, path, key string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, n.httpURL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
}

// seedDashboard gives every page something to show: an admin key, rate
// limit checks, a block and clicked links. It returns the key.
func seedDashboard(t *testing.T, n *testNode) string {
	t.Helper()
	var k struct {
		Key string `json:"key"`
	}
	apiCall(t, n, "POST", "/v1/keys", "", map[string]any{"name": "dashboard", "scopes": []string{"admin"}}, http.StatusCreated, &k)
	apiCall(t, n, "PUT", "/v1/ratelimit/policies/login", k.Key, map[string]any{"algorithm": "sliding_window_log", "limit": 20, "period": "1m"}, http.StatusCreated, nil)
	apiCall(t, n, "POST", "/v1/ratelimit/blocks", k.Key, map[string]any{"key": "203.0.113.9", "duration": "1h", "reason": "credential stuffing"}, http.StatusCreated, nil)
	// The most clicked link is on a custom domain, its code also a link
	// without a domain and without clicks: the links page must ask for
	// the domain's.
	apiCall(t, n, "POST", "/v1/domains", k.Key, map[string]any{"domain": "go.example.com"}, http.StatusCreated, nil)
	apiCall(t, n, "POST", "/v1/links", k.Key, map[string]any{"url": "https://example.com/plain", "slug": "sale"}, http.StatusCreated, nil)
	for i := range 3 {
		var l struct {
			Code string `json:"code"`
		}
		body := map[string]any{"url": "https://example.com/sale/" + string(rune('a'+i))}
		host := ""
		if i == 0 {
			body["slug"], body["domain"], host = "sale", "go.example.com", "go.example.com"
		}
		apiCall(t, n, "POST", "/v1/links", k.Key, body, http.StatusCreated, &l)
		for j := range 5 - i {
			ua := "Mozilla/5.0 (X11; Linux x86_64) Chrome/126.0"
			if j%2 == 1 {
				ua = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
			}
			req, _ := http.NewRequest("GET", n.httpURL+"/"+l.Code, nil)
			if host != "" {
				req.Host = host
			}
			req.Header.Set("User-Agent", ua)
			resp, err := noFollow.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	// Clicks are stored in batches: the links page must find them all, the
	// custom domain's link first and its breakdown with rows, before it
	// opens (on a loaded machine the first batch can come late).
	enginetest.EventuallyNil(t, 30*time.Second, "the seeded clicks stored", func() error {
		var top struct {
			Items []struct {
				Domain  string `json:"domain"`
				Clicks  int    `json:"clicks"`
				BotHits int    `json:"bot_hits"`
			} `json:"items"`
		}
		apiCall(t, n, "GET", "/v1/stats/links?limit=1", k.Key, nil, http.StatusOK, &top)
		var st struct {
			Totals struct{ Humans, Bots int } `json:"totals"`
		}
		apiCall(t, n, "GET", "/v1/links/sale/stats?by=day&domain=go.example.com", k.Key, nil, http.StatusOK, &st)
		return enginetest.State(len(top.Items) == 1 && top.Items[0].Domain == "go.example.com" &&
			top.Items[0].Clicks+top.Items[0].BotHits == 5 && st.Totals.Humans+st.Totals.Bots == 5,
			"top links %+v, the domain link's totals %+v", top.Items, st.Totals)
	})
	return k.Key
}

// seededNotifications are what seedNotifications made for the
// notification pages.
type seededNotifications struct {
	sent   string // ann's order.shipped, sent through the outbox
	dead   string // bob's order.shipped, dead-lettered by the webhook's 410
	deadID string // its dead letter
}

// seedNotifications sends ann a notification that goes out through the
// outbox, and bob one on the webhook channel to a receiver answering 410
// Gone: permanent, so the orders delivery is dead-lettered on its first
// attempt, with no retry to wait for. It waits for both outcomes.
func seedNotifications(t *testing.T, n *testNode, key string, hook *enginetest.WebhookReceiver) seededNotifications {
	t.Helper()
	var s seededNotifications
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	apiCall(t, n, "POST", "/v1/notifications", key, map[string]any{"user_id": "ann", "type": "order.shipped",
		"data": map[string]any{"order": "#42", "name": "Ann"}}, http.StatusAccepted, &acc)
	s.sent = acc.NotificationID
	apiCall(t, n, "PUT", "/v1/users/bob/settings", key, map[string]any{"contacts": map[string]any{"webhook_url": hook.URL + "/hook"}}, http.StatusOK, nil)
	apiCall(t, n, "POST", "/v1/notifications", key, map[string]any{"user_id": "bob", "type": "order.shipped",
		"data": map[string]any{"order": "#43", "name": "Bob"}, "channels": []string{"webhook"}}, http.StatusAccepted, &acc)
	s.dead = acc.NotificationID

	enginetest.EventuallyNil(t, 20*time.Second, "ann's notification sent", func() error {
		var rec notificationBody
		apiCall(t, n, "GET", "/v1/notifications/"+s.sent, key, nil, http.StatusOK, &rec)
		return enginetest.State(rec.settled(), "%s", fmt.Sprint(rec))
	})
	enginetest.EventuallyNil(t, 20*time.Second, "bob's dead letter", func() error {
		var dl deadLettersBody
		apiCall(t, n, "GET", "/v1/dead-letters", key, nil, http.StatusOK, &dl)
		for _, d := range dl.Items {
			if d.NotificationID == s.dead {
				s.deadID = d.ID
				return enginetest.State(true, "%s", "")
			}
		}
		return enginetest.State(false, "%s", fmt.Sprint(dl))
	})
	return s
}

type deadLettersBody struct {
	Items []struct {
		ID             string `json:"id"`
		NotificationID string `json:"notification_id"`
		ReplayedAt     string `json:"replayed_at"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// checkTraffic sends rate limit checks until the test ends, so the overview
// has rates to draw.
func checkTraffic(t *testing.T, n *testNode, key string) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			policy := "free"
			if i%2 == 1 {
				policy = "login" // 20 a minute: soon refused
			}
			body, _ := json.Marshal(map[string]any{"policy": policy, "key": "user-" + string(rune('a'+i%3))})
			req, _ := http.NewRequest("POST", n.httpURL+"/v1/ratelimit/check", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+key)
			if resp, err := apiClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}()
}

// showPage switches the dashboard to page (a hash route) and waits for sel.
func showPage(b *browser, t *testing.T, page, sel string) {
	t.Helper()
	b.run(t, "open "+page, eval(`location.hash = "#/`+page+`"`), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// TestDashboardInBrowser signs in and opens every page in Chromium: each
// loads without console errors; a user's notification is found and its
// delivery timeline shown; a dead letter is replayed with a click (and the
// API shows the delivery sent again); a policy is simulated and plotted;
// a preference link opens the preference page, where critical is locked
// and turning marketing off is saved. The screenshots are kept (see
// artifactsDir).
func TestDashboardInBrowser(t *testing.T) {
	b := newBrowser(t)
	hook := enginetest.StartWebhookReceiver(t, http.StatusGone)
	cfg := testConfig(t)
	cfg.AllowPrivate = true // the webhook receiver is on loopback
	n := startNode(t, cfg)
	key := seedDashboard(t, n)
	seeded := seedNotifications(t, n, key, hook)
	checkTraffic(t, n, key)
	// An Envoy reporting a quota bucket no rule matches: the Overview lists it.
	if _, err := openQuota(t, n.grpcAddr).report("edge", map[string]string{"tenant": "acme"}, 7, time.Second); err != nil {
		t.Fatal(err)
	}

	b.run(t, "open the sign-in page", chromedp.Navigate(n.httpURL+"/ui/?poll=500"), chromedp.WaitVisible(chromedp.ID("api-key")))
	b.screenshot(t, "00-sign-in")
	b.noErrors(t, "sign-in")
	b.run(t, "sign in with a wrong key", chromedp.SendKeys(chromedp.ID("api-key"), "sk_wrong"), chromedp.Click(chromedp.CSS("#signin button[type=submit]")),
		waitText("#signin .problem", "invalid or revoked"))
	b.run(t, "sign in", chromedp.SetValue(chromedp.ID("api-key"), key), chromedp.Click(chromedp.CSS("#signin button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("nav")), chromedp.WaitVisible(chromedp.ID("chart-checks")),
		// Two polls make a rate, three a line.
		waitJS(`[...document.querySelectorAll("#chart-checks svg path")].some(p => p.getAttribute("d").includes("L"))`))
	b.run(t, "the quota buckets on the overview", waitText("#rlqs-buckets", "(unmatched)"))
	b.screenshot(t, "01-overview")
	b.noErrors(t, "overview")

	showPage(b, t, "notifications", "#search-user")
	b.run(t, "search ann's notifications", chromedp.SendKeys(chromedp.ID("search-user"), "ann"),
		chromedp.Click(chromedp.CSS("#search button[type=submit]")),
		waitText("#notifications", seeded.sent), waitText("#notifications", "email: sent"))
	b.run(t, "open the timeline", chromedp.Click(chromedp.CSS("#notifications tbody tr:first-child button")),
		chromedp.WaitVisible(chromedp.CSS("#notifications tr.expand ul.timeline")),
		waitText("#notifications tr.expand", "attempt 1: handed to the outbox"),
		waitText("#notifications tr.expand", "sent after 1 attempt"),
		waitText("#notifications tr.expand", "suppressed: channel_off"))
	if ok := b.evalBool(t, `!document.querySelector("#notifications tr.expand").textContent.includes("attempt 2")`); !ok {
		t.Errorf("ann's timeline shows a second attempt; each delivery went out once")
	}
	b.screenshot(t, "02-notifications")
	b.noErrors(t, "notifications")

	b.run(t, "filter bob's by status dead", eval(`location.hash = "#/notifications?user=bob&status=dead"`),
		waitText("#notifications", seeded.dead), waitText("#notifications", "webhook: dead"))
	b.noErrors(t, "notifications filtered")

	// Carol's notification waits for the end of her quiet hours: its
	// timeline offers to cancel it, and the click cancels it.
	now := time.Now().UTC()
	apiCall(t, n, "PUT", "/v1/users/carol/settings", key, map[string]any{"quiet_hours": map[string]any{
		"start": now.Add(-time.Hour).Format("15:04"), "end": now.Add(2 * time.Hour).Format("15:04")}}, http.StatusOK, nil)
	var waiting struct {
		NotificationID string `json:"notification_id"`
	}
	apiCall(t, n, "POST", "/v1/notifications", key, map[string]any{"user_id": "carol", "type": "order.shipped",
		"data": map[string]any{"order": "#44"}, "channels": []string{"email"}}, http.StatusAccepted, &waiting)
	b.run(t, "open carol's timeline", eval(`location.hash = "#/notifications?user=carol"`),
		waitText("#notifications", "email: queued"), chromedp.Click(chromedp.CSS("#notifications tbody tr:first-child button")),
		chromedp.WaitVisible(chromedp.CSS("#notifications tr.expand button.cancel")))
	b.run(t, "cancel it", chromedp.Click(chromedp.CSS("#notifications tr.expand button.cancel")),
		waitText("#notifications tr.expand .cancel-outcome", "canceled: email canceled"),
		waitText("#notifications tbody tr:first-child", "email: canceled"))
	b.screenshot(t, "02b-notification-canceled")
	b.noErrors(t, "notification canceled")
	var canceled notificationBody
	apiCall(t, n, "GET", "/v1/notifications/"+waiting.NotificationID, key, nil, http.StatusOK, &canceled)
	if len(canceled.Deliveries) != 1 || canceled.Deliveries[0].Status != "canceled" {
		t.Errorf("after the click, carol's notification = %v, want its email canceled", canceled)
	}

	showPage(b, t, "dead-letters", "#dead-letters")
	row := fmt.Sprintf(`#dead-letters tr[data-id=%q]`, seeded.deadID)
	b.run(t, "see the dead letter", waitText(row, seeded.dead), waitText(row, "410"), waitText(row, "bob"))
	hook.SetStatus(http.StatusNoContent) // the receiver is back
	b.run(t, "replay it", chromedp.Click(chromedp.CSS(row+" button.replay")),
		waitText("#replay-result", "Replayed 1 dead letter."), waitText(row, "replayed"))
	b.screenshot(t, "03-dead-letters")
	b.noErrors(t, "dead letters")
	enginetest.EventuallyNil(t, 20*time.Second, "the replayed delivery sent", func() error {
		var rec notificationBody
		apiCall(t, n, "GET", "/v1/notifications/"+seeded.dead, key, nil, http.StatusOK, &rec)
		d := rec.Deliveries[0]
		return enginetest.State(d.Status == "sent" && d.Attempts == 2, "%s", fmt.Sprint(rec))
	})
	var dl deadLettersBody
	apiCall(t, n, "GET", "/v1/dead-letters", key, nil, http.StatusOK, &dl)
	for _, d := range dl.Items {
		if d.ID == seeded.deadID && d.ReplayedAt == "" {
			t.Errorf("dead letter %s has no replayed_at after the click", d.ID)
		}
	}
	if unique, total := hook.Counts(); unique != 1 || total != 2 {
		t.Errorf("webhook receiver saw %d ids in %d requests, want 1 id twice (the 410, then the replay)", unique, total)
	}

	showPage(b, t, "policies", "#policies")
	b.run(t, "simulate", chromedp.Click(chromedp.CSS("#sim-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#sim-chart svg rect")), waitText("#simulator", "refused"))
	b.screenshot(t, "04-policies")
	b.noErrors(t, "policies")

	showPage(b, t, "blocks", "#blocks")
	b.run(t, "see the block", waitText("#blocks", "203.0.113.9"))
	b.screenshot(t, "05-blocks")
	b.noErrors(t, "blocks")

	showPage(b, t, "links", "#top-links")
	b.run(t, "links chart", chromedp.WaitVisible(chromedp.CSS("#clicks-chart svg rect")))
	b.run(t, "link breakdown", chromedp.WaitVisible(chromedp.CSS("#link-daily svg rect")),
		chromedp.WaitVisible(chromedp.CSS("#link-groups tbody tr")), waitJS(`document.querySelector("#link-qr img").naturalWidth > 0`))
	// The live panel of the link shown (the most clicked): a redirect
	// served now shows there within seconds.
	var top struct {
		Items []struct{ Code, Domain string } `json:"items"`
	}
	apiCall(t, n, "GET", "/v1/stats/links?limit=1", key, nil, http.StatusOK, &top)
	b.run(t, "live panel listening", waitText("#live-status", "Listening"))
	req, _ := http.NewRequest("GET", n.httpURL+"/"+top.Items[0].Code, nil)
	if top.Items[0].Domain != "" { // on its custom domain, by Host
		req.Host = top.Items[0].Domain
	}
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36")
	resp, err := noFollow.Do(req)
	if err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("redirect %s: %v %v", top.Items[0].Code, resp, err)
	}
	resp.Body.Close()
	b.run(t, "live hit", chromedp.WaitVisible(chromedp.CSS("#live-hits tbody tr")), waitText("#live-status", "1 human click and 0 bot hits"))
	b.screenshot(t, "06-links")
	b.noErrors(t, "links")

	showPage(b, t, "providers", "#ready")
	b.screenshot(t, "07-providers")
	b.noErrors(t, "providers")

	b.run(t, "sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("api-key")))
	b.noErrors(t, "sign-out")

	// The preference page needs no session: the signed link is enough.
	var link struct {
		URL   string `json:"url"`
		Token string `json:"token"`
	}
	apiCall(t, n, "POST", "/v1/users/ann/preference-link", key, map[string]any{"ttl": "1h"}, http.StatusOK, &link)
	_, frag, ok := strings.Cut(link.URL, "/ui/preferences#t=")
	if !ok || frag != link.Token {
		t.Fatalf("preference link %q does not carry its token in the fragment", link.URL)
	}
	b.run(t, "open the preference link", chromedp.Navigate(n.httpURL+"/ui/preferences#t="+link.Token),
		chromedp.WaitVisible(chromedp.ID("prefs")), waitText("#prefs", "Locked on"),
		waitJS(`(() => { const c = document.getElementById("cat-critical"); return c.checked && c.disabled; })()`),
		waitJS(`document.getElementById("cat-marketing").checked && !document.getElementById("cat-marketing").disabled`))
	b.run(t, "turn marketing off and save", chromedp.Click(chromedp.ID("cat-marketing")),
		waitJS(`!document.getElementById("cat-marketing").checked`),
		chromedp.Click(chromedp.CSS("#prefs button[type=submit]")), waitText("#status", "Saved"),
		waitJS(`!document.getElementById("cat-marketing").checked && document.getElementById("cat-critical").checked`))
	b.screenshot(t, "08-preferences")
	b.noErrors(t, "preferences")
	var st struct {
		Channels   map[string]bool `json:"channels"`
		Categories map[string]bool `json:"categories"`
	}
	apiCall(t, n, "GET", "/v1/users/ann/settings", key, nil, http.StatusOK, &st)
	if st.Categories["marketing"] || !st.Categories["critical"] || !st.Categories["orders"] || !st.Channels["email"] {
		t.Errorf("ann's settings after the page = %+v; want marketing off, critical, orders and email on", st)
	}
}
