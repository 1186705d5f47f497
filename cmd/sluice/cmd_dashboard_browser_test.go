package main

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardSaysWhatItShows: the sign-in page says where a key comes
// from, and the overview says its tiles are totals and its charts rates,
// as the tiles and chart headings do.
func TestDashboardSaysWhatItShows(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, testConfig(t))
	key := seedDashboard(t, n)
	b.run(t, "open the sign-in page", chromedp.Navigate(n.httpURL+"/ui/?poll=500"), chromedp.WaitVisible(chromedp.ID("api-key")),
		waitText("#key-hint", "sluice keys create --scope admin"))
	b.run(t, "sign in", chromedp.SetValue(chromedp.ID("api-key"), key), chromedp.Click(chromedp.CSS("#signin button[type=submit]")),
		waitText("#overview-legend", "Tiles: totals on this node since it started. Charts: rates per second"),
		waitText(".tiles", "checks allowed (total)"), waitText(".tiles", "redirects (total)"),
		waitText(".grid", "Rate limit checks per second"), waitText(".grid", "Notifications accepted per second"))
	b.noErrors(t, "overview")
}
