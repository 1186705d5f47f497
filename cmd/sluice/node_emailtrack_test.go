package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/gif"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

const (
	browserUA = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15"
	scannerUA = "Mozilla/5.0 (compatible; Proofpoint URL Defense)"
)

// hitTracked requests a tracked email link or pixel of the node as ua.
func hitTracked(t *testing.T, base, path, ua string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", base+path, nil)
	req.Header.Set("User-Agent", ua)
	r, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	return r
}

type trackedDelivery struct {
	Status    string
	ClickedAt string `json:"clicked_at"`
	OpenedAt  string `json:"opened_at"`
	Links     []struct {
		Code, URL string
		Clicks    int
		BotHits   int `json:"bot_hits"`
	}
}

// TestEmailTrackedLinksAndOpens: with notify.email.track_links and
// track_opens, an email's links become tracked links (one per URL, the
// no_track ones and the unsubscribe link left alone) and it carries an
// open pixel; a mail scanner opening every link and the pixel within a
// second of delivery counts as bot hits only, and a person's click later
// sets clicked_at and opened_at.
func TestEmailTrackedLinksAndOpens(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Links.BaseURL = "https://sl.test"
	cfg.Notify.Email.TrackLinks, cfg.Notify.Email.TrackOpens = true, true
	cfg.Links.UnknownPerMinute = 5
	// Long enough that the scanner's hits below fall inside it on a busy
	// CI host, short enough that the test does not wait long for the
	// reader's click after it.
	cfg.Notify.Email.BotWindow = 5 * time.Second
	cfg.Notify.Providers.SMTP.UnsubscribeURL = "https://shop.example/unsubscribe?u={user_id}"
	n := startNode(t, cfg)
	base := n.httpURL

	if code, resp := call(t, "PUT", base+"/v1/users/u7/settings", `{"contacts":{"email":"ann@example.test"}}`); code != 200 {
		t.Fatalf("PUT settings = %d %s", code, resp)
	}
	tmpl := map[string]any{"category": "marketing", "channels": map[string]any{"email": map[string]any{"en": map[string]string{
		"subject": "Sale",
		"body":    "Sale: {url}\nAgain: {url}\nReset: {no_track reset}\nUnsubscribe: https://shop.example/unsubscribe?u=u7\nAdmin: http://10.0.0.5/admin",
		"html": `<html><body><p><a href="{url}">Sale</a> <a href="https://shop.example/help" data-no-track>Help</a> ` +
			`<a href="{no_track reset}">Reset</a> <a href="https://shop.example/unsubscribe?u=u7">Unsubscribe</a></p></body></html>`,
	}}}}
	raw, _ := json.Marshal(tmpl)
	if code, resp := call(t, "PUT", base+"/v1/templates/promo.mail", string(raw)); code != 200 {
		t.Fatalf("PUT template = %d %s", code, resp)
	}
	if code, resp := call(t, "PUT", base+"/v1/templates/receipt.mail", `{"category":"orders","track_links":true,"channels":{"email":{"en":{"body":"{url}"}}}}`); code != 200 {
		t.Fatalf("PUT a template with track_links = %d %s", code, resp)
	}
	if code, resp := call(t, "GET", base+"/v1/templates/receipt.mail", ""); code != 200 || !strings.Contains(string(resp), `"track_links":true`) {
		t.Errorf("GET the template = %d %s, want track_links kept", code, resp)
	}
	if code, resp := call(t, "POST", base+"/v1/event-subscriptions", `{"url":"https://hooks.example.test/x","events":["delivery.clicked","delivery.opened"]}`); code != 201 {
		t.Errorf("subscribing to delivery.clicked and delivery.opened = %d %s", code, resp)
	}
	code, resp := call(t, "POST", base+"/v1/notifications", `{"user_id":"u7","type":"promo.mail","channels":["email"],
		"data":{"url":"https://shop.example/sale?a=1&b=2","reset":"https://shop.example/reset?token=s3cret"}}`)
	if code != 202 {
		t.Fatalf("POST = %d %s", code, resp)
	}
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	_ = json.Unmarshal(resp, &acc)

	var entry struct{ Body, HTML string }
	enginetest.EventuallyNil(t, 10*time.Second, "the email in the outbox", func() error {
		_, out := call(t, "GET", base+"/v1/outbox?user_id=u7", "")
		var page struct{ Items []struct{ Body, HTML string } }
		_ = json.Unmarshal(out, &page)
		if len(page.Items) == 0 {
			return enginetest.State(false, "%s", out)
		}
		entry = page.Items[0]
		return nil
	})
	tracked := regexp.MustCompile(`https://sl\.test(/e/[A-Za-z0-9_-]{16})`)
	textLinks := tracked.FindAllStringSubmatch(entry.Body, -1)
	if len(textLinks) != 2 || textLinks[0][1] != textLinks[1][1] {
		t.Fatalf("text part %q: want the sale link twice as one tracked link", entry.Body)
	}
	sale := textLinks[0][1]
	for _, keep := range []string{"Reset: https://shop.example/reset?token=s3cret", "Unsubscribe: https://shop.example/unsubscribe?u=u7",
		"Admin: http://10.0.0.5/admin"} { // a private address is no target for a redirect
		if !strings.Contains(entry.Body, keep) {
			t.Errorf("text part %q: want %q untouched", entry.Body, keep)
		}
	}
	if strings.Contains(entry.Body, "shop.example/sale") {
		t.Errorf("text part %q still has the long sale link", entry.Body)
	}
	for _, keep := range []string{`href="https://shop.example/help" data-no-track`, `href="https://shop.example/reset?token=s3cret"`,
		`href="https://shop.example/unsubscribe?u=u7"`, `<a href="https://sl.test` + sale + `">Sale</a>`} {
		if !strings.Contains(entry.HTML, keep) {
			t.Errorf("HTML part %q: want %q", entry.HTML, keep)
		}
	}
	var pixel string
	for _, m := range tracked.FindAllStringSubmatch(entry.HTML, -1) {
		if m[1] != sale {
			pixel = m[1]
		}
	}
	if pixel == "" || !strings.Contains(entry.HTML, `width="1" height="1"`) {
		t.Fatalf("HTML part %q: want an open pixel", entry.HTML)
	}

	// A mail scanner opens every link and the pixel as the message arrives.
	for _, ua := range []string{scannerUA, browserUA} {
		if r := hitTracked(t, base, sale, ua); r.StatusCode != http.StatusFound || r.Header.Get("Location") != "https://shop.example/sale?a=1&b=2" {
			t.Fatalf("scanner on the sale link = %d to %q", r.StatusCode, r.Header.Get("Location"))
		}
		if r := hitTracked(t, base, pixel, ua); r.StatusCode != http.StatusOK {
			t.Fatalf("scanner on the pixel = %d", r.StatusCode)
		}
	}
	email := func() trackedDelivery {
		_, body := call(t, "GET", base+"/v1/notifications/"+acc.NotificationID, "")
		var rec struct{ Deliveries []trackedDelivery }
		_ = json.Unmarshal(body, &rec)
		if len(rec.Deliveries) != 1 {
			t.Fatalf("deliveries: %s", body)
		}
		return rec.Deliveries[0]
	}
	d := email()
	if d.ClickedAt != "" || d.OpenedAt != "" || len(d.Links) != 1 || d.Links[0].Clicks != 0 || d.Links[0].BotHits != 2 {
		t.Fatalf("after the scanner: %+v; want two bot hits, no click and no open", d)
	}

	// The reader clicks later: once the bot window has passed, the click counts.
	enginetest.EventuallyNil(t, 20*time.Second, "a person's click counted", func() error {
		hitTracked(t, base, sale, browserUA)
		d = email()
		return enginetest.State(d.ClickedAt != "", "%+v", d)
	})
	if d.OpenedAt == "" || d.OpenedAt > d.ClickedAt || d.Links[0].Clicks != 1 || d.Links[0].URL != "https://shop.example/sale?a=1&b=2" {
		t.Errorf("after the click: %+v; want one click, opened by it", d)
	}
	r := hitTracked(t, base, pixel, browserUA)
	img, err := gif.Decode(r.Body)
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "image/gif" || err != nil || img.Bounds().Dx() != 1 || img.Bounds().Dy() != 1 {
		t.Errorf("pixel = %d %q (%v): want a 1x1 GIF", r.StatusCode, r.Header.Get("Content-Type"), err)
	}
	if cc := r.Header.Get("Cache-Control"); !slices.Contains(strings.Split(cc, ", "), "no-store") || r.Header.Get("Pragma") != "no-cache" {
		t.Errorf("pixel Cache-Control %q, Pragma %q: want no caching", cc, r.Header.Get("Pragma"))
	}
	_, metrics := call(t, "GET", base+"/metrics", "")
	for _, want := range []string{`sluice_notify_email_hits_total{kind="click",result="scanner"} 1`, `sluice_notify_email_hits_total{kind="click",result="human"} 1`,
		`sluice_notify_email_hits_total{kind="open",result="early"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Guessing tokens: each unknown one costs a lookup, so a client gets
	// links.unknown_per_minute of them, then 429 without one, its real
	// links too, as the redirect route treats unknown codes.
	for i := range cfg.Links.UnknownPerMinute {
		if code, body := call(t, "GET", base+fmt.Sprintf("/e/AAAAAAAAAAAAAA%02d", i), ""); code != 404 {
			t.Fatalf("unknown token %d = %d %s, want 404 problem", i, code, body)
		}
	}
	r = hitTracked(t, base, "/e/AAAAAAAAAAAAAAzz", browserUA)
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("unknown token past the limit = %d, Retry-After %q, %q; want 429 problem with Retry-After",
			r.StatusCode, r.Header.Get("Retry-After"), r.Header.Get("Content-Type"))
	}
	if r := hitTracked(t, base, sale, browserUA); r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a real tracked link from the limited client = %d, want 429", r.StatusCode)
	}
}

// TestEmailTrackedLinksTwoNodes: an email sent through node A, its tracked
// link clicked and its pixel loaded through node B (one database, one
// NATS), with no bot window: the delivery shows the click and the open
// on either node.
func TestEmailTrackedLinksTwoNodes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Links.BaseURL = "https://sl.test"
	cfg.Notify.Email.TrackLinks, cfg.Notify.Email.TrackOpens = true, true
	cfg.Notify.Email.BotWindow = 0 // no window, so the test needs no wait
	a, b := startTwoNodes(t, cfg)
	user := "u2n" + strconv.FormatInt(time.Now().UnixNano(), 36) // the database is shared with other runs
	if code, resp := call(t, "PUT", a.httpURL+"/v1/users/"+user+"/settings", `{"contacts":{"email":"bo@example.test"}}`); code != 200 {
		t.Fatalf("PUT settings = %d %s", code, resp)
	}
	if code, resp := call(t, "PUT", a.httpURL+"/v1/templates/news.twonodes", `{"category":"orders","channels":{"email":{"en":{"subject":"News",
		"body":"Read {url}","html":"<p><a href=\"{url}\">Read</a></p>"}}}}`); code != 200 {
		t.Fatalf("PUT template = %d %s", code, resp)
	}
	code, resp := call(t, "POST", a.httpURL+"/v1/notifications", `{"user_id":"`+user+`","type":"news.twonodes","channels":["email"],"data":{"url":"https://shop.example/news"}}`)
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	if code != 202 || json.Unmarshal(resp, &acc) != nil {
		t.Fatalf("POST on A = %d %s", code, resp)
	}
	var html string
	enginetest.EventuallyNil(t, 15*time.Second, "the email in the outbox", func() error {
		_, out := call(t, "GET", a.httpURL+"/v1/outbox?user_id="+user, "")
		var page struct{ Items []struct{ HTML string } }
		_ = json.Unmarshal(out, &page)
		if len(page.Items) == 0 {
			return enginetest.State(false, "%s", out)
		}
		html = page.Items[0].HTML
		return nil
	})
	paths := regexp.MustCompile(`https://sl\.test(/e/[A-Za-z0-9_-]{16})`).FindAllStringSubmatch(html, -1)
	if len(paths) != 2 { // the link, then the pixel
		t.Fatalf("HTML part %q: want a tracked link and a pixel", html)
	}
	if r := hitTracked(t, b.httpURL, paths[0][1], browserUA); r.StatusCode != http.StatusFound || r.Header.Get("Location") != "https://shop.example/news" {
		t.Fatalf("the tracked link on B = %d to %q", r.StatusCode, r.Header.Get("Location"))
	}
	if r := hitTracked(t, b.httpURL, paths[1][1], browserUA); r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "image/gif" {
		t.Fatalf("the pixel on B = %d %q", r.StatusCode, r.Header.Get("Content-Type"))
	}
	for _, n := range []*testNode{a, b} {
		_, body := call(t, "GET", n.httpURL+"/v1/notifications/"+acc.NotificationID, "")
		var rec struct{ Deliveries []trackedDelivery }
		if json.Unmarshal(body, &rec) != nil || len(rec.Deliveries) != 1 || rec.Deliveries[0].ClickedAt == "" || rec.Deliveries[0].OpenedAt == "" {
			t.Errorf("the delivery on %s: %s; want clicked_at and opened_at", n.httpURL, body)
		}
	}
}
