package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestSMSConversionsCreditTheNotification: with links.notification_click_ids,
// a tapped SMS link carries a click id to the shop, the shop reports a sale
// with it, and the notification shows the conversion on its link.
func TestSMSConversionsCreditTheNotification(t *testing.T) {
	t.Parallel()
	tw := newTwilioServer(t)
	cfg := testConfig(t)
	p := &cfg.Notify.Providers
	p.Twilio.BaseURL, p.Twilio.AccountSID, p.Twilio.AuthToken, p.Twilio.From, p.Twilio.Rate = tw.URL, "AC1", "tok", "+15550000000", 50
	p.ShortenSMSLinks = true
	cfg.Links.BaseURL = "https://sl.test"
	cfg.Links.NotificationClickIDs = true
	n := startNode(t, cfg)
	base := n.httpURL

	if code, resp := call(t, "PUT", base+"/v1/users/u9/settings", `{"contacts":{"phone":"+4915112345678"}}`); code != 200 {
		t.Fatalf("PUT settings = %d %s", code, resp)
	}
	if code, resp := call(t, "PUT", base+"/v1/templates/promo",
		`{"category":"marketing","channels":{"default":{"en":{"subject":"Sale","body":"20% off: {url}"}}}}`); code != 200 {
		t.Fatalf("PUT template = %d %s", code, resp)
	}
	_, resp := call(t, "POST", base+"/v1/notifications", `{"user_id":"u9","type":"promo","data":{"url":"https://shop.example/sale"},"channels":["sms"]}`)
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	_ = json.Unmarshal(resp, &acc)
	type link struct {
		Code        string
		Clicks      int
		Conversions int
	}
	links := func() []link {
		_, body := call(t, "GET", base+"/v1/notifications/"+acc.NotificationID, "")
		var rec struct {
			Deliveries []struct {
				Status string
				Links  []link
			}
		}
		_ = json.Unmarshal(body, &rec)
		if len(rec.Deliveries) != 1 || rec.Deliveries[0].Status != "sent" {
			return nil
		}
		return rec.Deliveries[0].Links
	}
	enginetest.EventuallyNil(t, 10*time.Second, "the SMS is sent with its link", func() error {
		return enginetest.State(len(links()) == 1, "%s", "")
	})
	code := links()[0].Code

	req, _ := http.NewRequest("GET", base+"/"+code, nil)
	req.Header.Set("User-Agent", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148")
	r, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	loc, _ := url.Parse(r.Header.Get("Location"))
	cid := loc.Query().Get("sluice_cid")
	if r.StatusCode != http.StatusFound || !strings.HasPrefix(loc.String(), "https://shop.example/sale?") || cid == "" {
		t.Fatalf("tapping the SMS link = %d to %q, want the shop with a sluice_cid", r.StatusCode, loc)
	}
	for range 2 { // the shop retries: counted once
		if status, body := call(t, "POST", base+"/v1/conversions", `{"click_id":"`+cid+`","event":"sale","value":49.9}`); status != 201 && status != 200 {
			t.Fatalf("POST /v1/conversions = %d %s", status, body)
		} else if !strings.Contains(string(body), `"notification_id":"`+acc.NotificationID+`"`) {
			t.Errorf("conversion %s does not name the notification", body)
		}
	}
	enginetest.EventuallyNil(t, 10*time.Second, "the notification shows the click and the sale", func() error {
		l := links()
		return enginetest.State(len(l) == 1 && l[0].Clicks == 1 && l[0].Conversions == 1, "%s", "")
	})
	if _, metrics := get(t, base+"/metrics"); !strings.Contains(string(metrics), "sluice_links_conversions_total 1\n") {
		t.Errorf("metrics lack the one conversion")
	}
}
