package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify/twilio"
)

// twilioServer is a Twilio-compatible Messages API recording the forms it
// accepted.
type twilioServer struct {
	*httptest.Server
	mu    sync.Mutex
	forms []url.Values
}

func newTwilioServer(t *testing.T) *twilioServer {
	t.Helper()
	s := &twilioServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "AC1" || p != "tok" || !strings.HasSuffix(r.URL.Path, "/Accounts/AC1/Messages.json") {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_ = r.ParseForm()
		s.mu.Lock()
		s.forms = append(s.forms, r.PostForm)
		n := len(s.forms)
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"sid":"SM%d","status":"queued"}`, n)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *twilioServer) form(i int) url.Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.forms) {
		return nil
	}
	return s.forms[i]
}

func TestTwilioProviderAndReceipts(t *testing.T) {
	t.Parallel()
	tw := newTwilioServer(t)
	cfg := testConfig(t)
	p := &cfg.Notify.Providers
	p.CallbackBaseURL = "https://sluice.test"
	p.Twilio.BaseURL, p.Twilio.AccountSID, p.Twilio.AuthToken, p.Twilio.From, p.Twilio.Rate = tw.URL, "AC1", "tok", "+15550000000", 50
	p.ShortenSMSLinks = true
	cfg.Links.BaseURL = "https://sl.test"
	n := startNode(t, cfg)
	base := n.httpURL

	if code, resp := call(t, "PUT", base+"/v1/users/u9/settings", `{"contacts":{"phone":"+4915112345678"}}`); code != 200 {
		t.Fatalf("PUT settings = %d %s", code, resp)
	}
	code, resp := call(t, "POST", base+"/v1/notifications", `{"user_id":"u9","type":"otp","data":{"code":"123456","app":"Shop","minutes":"5"},"channels":["sms"],"expires_at":"2099-01-01T00:00:00Z"}`)
	if code != 202 {
		t.Fatalf("POST = %d %s", code, resp)
	}
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	_ = json.Unmarshal(resp, &acc)
	type delivery struct {
		Channel, Provider, Status string
		ProviderMessageID         string `json:"provider_message_id"`
	}
	sms := func() delivery {
		_, body := call(t, "GET", base+"/v1/notifications/"+acc.NotificationID, "")
		var rec struct{ Deliveries []delivery }
		_ = json.Unmarshal(body, &rec)
		for _, d := range rec.Deliveries {
			if d.Channel == "sms" {
				return d
			}
		}
		return delivery{}
	}
	enginetest.EventuallyNil(t, 10*time.Second, "the SMS is sent through Twilio", func() error {
		d := sms()
		return enginetest.State(d.Status == "sent", "%s", fmt.Sprint(d))
	})
	if d := sms(); d.Provider != "twilio" || d.ProviderMessageID != "SM1" {
		t.Errorf("delivery = %+v, want twilio with SID SM1", d)
	}
	f := tw.form(0)
	if !strings.Contains(f.Get("Body"), "123456") || f.Get("To") != "+4915112345678" {
		t.Errorf("Twilio got %v", f)
	}
	cb, err := url.Parse(f.Get("StatusCallback"))
	if err != nil || cb.Host != "sluice.test" {
		t.Fatalf("StatusCallback = %q", f.Get("StatusCallback"))
	}

	// A forged receipt is refused; Twilio's signed one moves it to delivered.
	form := url.Values{"MessageSid": {"SM1"}, "MessageStatus": {"delivered"}}
	post := func(sig string) int {
		req, _ := http.NewRequest("POST", base+cb.RequestURI(), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Twilio-Signature", sig)
		resp, err := apiClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("bm90IGl0"); code != http.StatusUnauthorized {
		t.Errorf("forged callback = %d, want 401", code)
	}
	if code := post(twilio.Signature("tok", cb.String(), form)); code != http.StatusNoContent {
		t.Fatalf("signed callback = %d, want 204", code)
	}
	if d := sms(); d.Status != "delivered" {
		t.Errorf("after the receipt: %s, want delivered", d.Status)
	}

	// Link shortening: the SMS carries a tracked short link, and the
	// notification shows it with its clicks.
	if code, resp := call(t, "PUT", base+"/v1/templates/order.tracking",
		`{"category":"orders","channels":{"default":{"en":{"subject":"Tracking","body":"Track it: {url}"}}}}`); code != 200 {
		t.Fatalf("PUT template = %d %s", code, resp)
	}
	_, resp = call(t, "POST", base+"/v1/notifications", `{"user_id":"u9","type":"order.tracking","data":{"url":"https://shop.example/orders/42?x=1"},"channels":["sms"]}`)
	var acc2 struct {
		NotificationID string `json:"notification_id"`
	}
	_ = json.Unmarshal(resp, &acc2)
	type link struct {
		Code, URL string
		ShortURL  string `json:"short_url"`
		Clicks    int
	}
	var links []link
	enginetest.EventuallyNil(t, 10*time.Second, "the tracked SMS is sent", func() error {
		_, body := call(t, "GET", base+"/v1/notifications/"+acc2.NotificationID, "")
		var rec struct {
			Deliveries []struct {
				Status string
				Links  []link
			}
		}
		_ = json.Unmarshal(body, &rec)
		if len(rec.Deliveries) == 1 && rec.Deliveries[0].Status == "sent" {
			links = rec.Deliveries[0].Links
			return enginetest.State(true, "%s", "")
		}
		return enginetest.State(false, "%s", string(body))
	})
	if len(links) != 1 || links[0].URL != "https://shop.example/orders/42?x=1" || !strings.HasPrefix(links[0].ShortURL, "https://sl.test/") {
		t.Fatalf("links = %+v, want the order URL behind a short link", links)
	}
	if body := tw.form(1).Get("Body"); body != "Track it: "+links[0].ShortURL {
		t.Errorf("SMS body = %q, want the short link", body)
	}

	_, ready := get(t, base+"/readyz")
	if !strings.Contains(string(ready), `"breakers":{"twilio":"closed"}`) {
		t.Errorf("/readyz = %s, want the twilio breaker's state", ready)
	}
	_, metrics := get(t, base+"/metrics")
	if !strings.Contains(string(metrics), `sluice_notify_provider_calls_total{provider="twilio",result="ok"} 2`) {
		t.Errorf("metrics lack the provider call")
	}
}
