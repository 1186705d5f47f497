package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestInboxPageInBrowser opens the embeddable inbox page in Chromium with
// an inbox token and no session: it lists the user's message, shows a new
// one live (pushed by the event stream) with the unread count, and marks
// one read with a click, which the API then reports. The page may be
// framed by other sites; the dashboard may not.
func TestInboxPageInBrowser(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, testConfig(t))
	send := func(order string) {
		apiCall(t, n, "POST", "/v1/notifications", "", map[string]any{"user_id": "ivy", "type": "order.shipped",
			"channels": []string{"inapp"}, "data": map[string]string{"order": order}}, http.StatusAccepted, nil)
	}
	send("#1")
	enginetest.EventuallyNil(t, 10*time.Second, "the first message is in the inbox", func() error {
		var p struct{ Unread int }
		apiCall(t, n, "GET", "/v1/users/ivy/inbox", "", nil, http.StatusOK, &p)
		return enginetest.State(p.Unread == 1, "%s", "")
	})
	var tok struct{ Token, URL string }
	apiCall(t, n, "POST", "/v1/users/ivy/inbox-token", "", map[string]any{"ttl": "1h"}, http.StatusOK, &tok)
	if !strings.HasSuffix(tok.URL, "/ui/inbox#t="+tok.Token) {
		t.Fatalf("inbox link %q does not carry its token in the fragment", tok.URL)
	}

	b.run(t, "open the inbox page", chromedp.Navigate(n.httpURL+"/ui/inbox#t="+tok.Token),
		waitText("#inbox-list", "Order #1 shipped"), waitText("#unread", "1 unread"), waitText("#live", "live"))
	send("#2")
	b.run(t, "the new message arrives live", waitText("#inbox-list", "Order #2 shipped"), waitText("#unread", "2 unread"),
		waitJS(`document.querySelector("#inbox-list li").dataset.seq === "2"`))
	b.run(t, "mark the newest read", chromedp.Click(chromedp.CSS("#inbox-list li:first-child button.link")),
		waitText("#unread", "1 unread"), waitJS(`document.querySelector("#inbox-list li").className === "read"`))
	b.screenshot(t, "09-inbox")
	b.noErrors(t, "inbox")
	var p struct{ Unread int }
	apiCall(t, n, "GET", "/v1/users/ivy/inbox", "", nil, http.StatusOK, &p)
	if p.Unread != 1 {
		t.Errorf("unread after the click = %d, want 1", p.Unread)
	}

	for page, framable := range map[string]bool{"/ui/inbox": true, "/ui/": false} {
		resp, err := apiClient.Get(n.httpURL + page)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if got := resp.Header.Get("X-Frame-Options") == "" && strings.Contains(csp, "frame-ancestors *"); got != framable {
			t.Errorf("%s framable = %v (CSP %q), want %v", page, got, csp, framable)
		}
	}
}
