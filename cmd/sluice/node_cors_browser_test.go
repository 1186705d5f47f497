package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// appServer serves page at / from a listener of its own: a web
// application on another origin than the node's. It returns its origin.
func appServer(t *testing.T, ln net.Listener, page string) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	}))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}

// inboxAppPage is an application's page embedding <sluice-inbox> from
// node, styled through a custom property and a part, recording the
// element's events in window.inboxEvents.
func inboxAppPage(node, token string) string {
	return `<!doctype html>
<html><head><meta charset="utf-8"><title>App</title>
<style>
sluice-inbox { --sluice-inbox-accent: rgb(200, 0, 100); max-width: 480px; }
sluice-inbox::part(title) { text-transform: uppercase; }
</style>
<script type="module" src="` + node + `/ui/inbox.js"></script>
<script>
window.inboxEvents = [];
for (const type of ['sluice-inbox-unread', 'sluice-inbox-message', 'sluice-inbox-read', 'sluice-inbox-error']) {
  document.addEventListener(type, e => window.inboxEvents.push({type, detail: e.detail}));
}
</script>
</head><body>
<h1>My app</h1>
<sluice-inbox server="` + node + `" token="` + token + `"></sluice-inbox>
</body></html>`
}

// shadow is a JavaScript expression for the element matching sel in the
// inbox's shadow root.
func shadow(sel string) string {
	return fmt.Sprintf(`document.querySelector("sluice-inbox").shadowRoot.querySelector(%q)`, sel)
}

// waitShadowText waits until the shadow element matching sel contains text.
func waitShadowText(sel, text string) chromedp.Action[chromedp.Void] {
	return waitJS(fmt.Sprintf(`(() => { const e = %s; return !!e && e.textContent.includes(%q); })()`, shadow(sel), text))
}

// TestInboxElementFromAnotherOrigin loads <sluice-inbox> in Chromium on
// an application's page of an origin listed in --cors-origins: the user's
// message renders with the unread badge, a message sent after load
// arrives live over the inbox stream, and a click marks one read on the
// server. The same page on an origin not listed loads the element, which
// shows an error, not the messages.
func TestInboxElementFromAnotherOrigin(t *testing.T) {
	b := newBrowser(t)
	allowedLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	otherLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.HTTP.CORSOrigins = []string{"http://" + allowedLn.Addr().String()}
	n := startNode(t, cfg)
	send := func(order string) {
		apiCall(t, n, "POST", "/v1/notifications", "", map[string]any{"user_id": "ivy", "type": "order.shipped",
			"channels": []string{"inapp"}, "data": map[string]string{"order": order}}, http.StatusAccepted, nil)
	}
	unread := func() int {
		var p struct{ Unread int }
		apiCall(t, n, "GET", "/v1/users/ivy/inbox", "", nil, http.StatusOK, &p)
		return p.Unread
	}
	send("#1")
	enginetest.EventuallyNil(t, 10*time.Second, "the first message is in the inbox", func() error {
		return enginetest.State(unread() == 1, "%s", "")
	})
	var tok struct{ Token string }
	apiCall(t, n, "POST", "/v1/users/ivy/inbox-token", "", map[string]any{"ttl": "1h"}, http.StatusOK, &tok)
	page := inboxAppPage(n.httpURL, tok.Token)
	app := appServer(t, allowedLn, page)
	other := appServer(t, otherLn, page)

	b.run(t, "open the application's page", chromedp.Navigate(app+"/"),
		waitShadowText("[part~=list]", "Order #1 shipped"), waitShadowText("[part~=badge]", "1"),
		waitShadowText("[part~=status]", "Live"))
	if !b.evalBool(t, `getComputedStyle(`+shadow("[part~=badge]")+`).backgroundColor === "rgb(200, 0, 100)"`) {
		t.Error("--sluice-inbox-accent does not colour the badge")
	}
	if !b.evalBool(t, `getComputedStyle(`+shadow("[part~=title]")+`).textTransform === "uppercase"`) {
		t.Error("::part(title) does not style the title")
	}

	send("#2")
	b.run(t, "the new message arrives live", waitShadowText("[part~=list]", "Order #2 shipped"),
		waitShadowText("[part~=badge]", "2"), waitJS(shadow("li")+`.dataset.seq === "2"`),
		waitJS(`inboxEvents.some(e => e.type === "sluice-inbox-message" && e.detail.message.seq === 2)`))

	b.run(t, "mark the newest read", eval(shadow("li [part~=mark-read]")+".click()"),
		waitShadowText("[part~=badge]", "1"), waitJS(shadow("li")+`.className === "read"`),
		waitJS(`inboxEvents.some(e => e.type === "sluice-inbox-read" && e.detail.unread === 1)`))
	b.screenshot(t, "10-inbox-element")
	b.noErrors(t, "application page")
	if got := unread(); got != 1 {
		t.Errorf("unread on the server after the click = %d, want 1", got)
	}

	b.run(t, "open the page on an origin not allowed", chromedp.Navigate(other+"/"),
		waitShadowText("[part~=error]", "cannot be reached"),
		waitJS(`inboxEvents.some(e => e.type === "sluice-inbox-error" && e.detail.status === 0)`))
	if b.evalBool(t, shadow("[part~=list]")+`.textContent.includes("Order")`) {
		t.Error("the page of an origin not allowed shows the messages")
	}
	b.screenshot(t, "10-inbox-element-refused")
	// The browser reports the refused answer; nothing else may fail.
	b.mu.Lock()
	errs := b.errors
	b.errors = nil
	b.mu.Unlock()
	for _, e := range errs {
		if !strings.Contains(e, "CORS") && !strings.Contains(e, "Failed to fetch") {
			t.Errorf("page of an origin not allowed: %s", e)
		}
	}
}
