package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// apiCall sends a JSON request with key (none when empty) and decodes the
// answer into out (when not nil), failing the test on an unexpected status.
func apiCall(t *testing.T, n *node, method, path, key string, body any, want int, out any) {
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
	resp, err := http.DefaultClient.Do(req)
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
func seedDashboard(t *testing.T, n *node) string {
	t.Helper()
	var k struct {
		Key string `json:"key"`
	}
	apiCall(t, n, "POST", "/v1/keys", "", map[string]any{"name": "dashboard", "scopes": []string{"admin"}}, http.StatusCreated, &k)
	apiCall(t, n, "PUT", "/v1/ratelimit/policies/login", k.Key, map[string]any{"algorithm": "sliding_window_log", "limit": 20, "period": "1m"}, http.StatusCreated, nil)
	apiCall(t, n, "POST", "/v1/ratelimit/blocks", k.Key, map[string]any{"key": "203.0.113.9", "duration": "1h", "reason": "credential stuffing"}, http.StatusCreated, nil)
	for i := range 3 {
		var l struct {
			Code string `json:"code"`
		}
		apiCall(t, n, "POST", "/v1/links", k.Key, map[string]any{"url": "https://example.com/sale/" + string(rune('a'+i))}, http.StatusCreated, &l)
		for j := range 5 - i {
			ua := "Mozilla/5.0 (X11; Linux x86_64) Chrome/126.0"
			if j%2 == 1 {
				ua = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
			}
			req, _ := http.NewRequest("GET", n.httpURL+"/"+l.Code, nil)
			req.Header.Set("User-Agent", ua)
			resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	return k.Key
}

// checkTraffic sends rate limit checks until the test ends, so the overview
// has rates to draw.
func checkTraffic(t *testing.T, n *node, key string) {
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
			req.Header.Set("Authorization", "Bearer "+key)
			if resp, err := http.DefaultClient.Do(req); err == nil {
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
// loads without console errors; a policy is simulated and plotted. The
// screenshots are kept (see artifactsDir).
func TestDashboardInBrowser(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, testConfig(t))
	key := seedDashboard(t, n)
	checkTraffic(t, n, key)

	b.run(t, "open the sign-in page", chromedp.Navigate(n.httpURL+"/ui/?poll=500"), chromedp.WaitVisible(chromedp.ID("api-key")))
	b.screenshot(t, "00-sign-in")
	b.noErrors(t, "sign-in")
	b.run(t, "sign in with a wrong key", chromedp.SendKeys(chromedp.ID("api-key"), "sk_wrong"), chromedp.Click(chromedp.CSS("#signin button[type=submit]")),
		waitText("#signin .problem", "invalid or revoked"))
	b.run(t, "sign in", chromedp.SetValue(chromedp.ID("api-key"), key), chromedp.Click(chromedp.CSS("#signin button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("nav")), chromedp.WaitVisible(chromedp.ID("chart-checks")),
		// Two polls make a rate, three a line.
		waitJS(`[...document.querySelectorAll("#chart-checks svg path")].some(p => p.getAttribute("d").includes("L"))`))
	b.screenshot(t, "01-overview")
	b.noErrors(t, "overview")

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
	b.screenshot(t, "06-links")
	b.noErrors(t, "links")

	showPage(b, t, "providers", "#ready")
	b.screenshot(t, "07-providers")
	b.noErrors(t, "providers")

	b.run(t, "sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("api-key")))
	b.noErrors(t, "sign-out")
}
