package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// natsPrefix returns a stream prefix for one test on the shared NATS at
// url, and deletes that test's streams when it ends (after the node stops).
func natsPrefix(t *testing.T, url string) string {
	t.Helper()
	prefix := "T" + rand.Text()[:10] + "_"
	t.Cleanup(func() {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Errorf("connect to clean up streams: %v", err)
			return
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		names := js.StreamNames(ctx)
		var mine []string
		for name := range names.Name() {
			if strings.HasPrefix(name, prefix) {
				mine = append(mine, name)
			}
		}
		for _, name := range mine {
			if err := js.DeleteStream(ctx, name); err != nil {
				t.Errorf("delete stream %s: %v", name, err)
			}
		}
	})
	return prefix
}

// call sends method path with body (JSON unless empty) and extra headers
// given as name, value pairs, and returns the status and body.
// It fails the test when the request fails, so only the test's goroutine
// calls it; others call tryCall.
func call(t *testing.T, method, url, body string, headers ...string) (int, []byte) {
	t.Helper()
	code, b, err := tryCall(method, url, body, headers...)
	if err != nil {
		t.Fatal(err)
	}
	return code, b
}

// tryCall is call returning its error, for any goroutine.
func tryCall(method, url, body string, headers ...string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

type problemBody struct {
	Status int
	Errors []struct{ Field, Detail string }
}

func fieldsOf(body []byte) []string {
	var p problemBody
	_ = json.Unmarshal(body, &p)
	var out []string
	for _, f := range p.Errors {
		out = append(out, f.Field)
	}
	return out
}

type deliveryBody struct {
	Channel, Provider, Status, Error string
	Attempts                         int
	UpdatedAt                        time.Time `json:"updated_at"`
}

type notificationBody struct {
	ID         string
	CreatedAt  time.Time `json:"created_at"`
	Deliveries []deliveryBody
}

func getNotification(t *testing.T, base, id string) notificationBody {
	t.Helper()
	code, body := call(t, "GET", base+"/v1/notifications/"+id, "")
	if code != 200 {
		t.Fatalf("GET notification %s = %d %s", id, code, body)
	}
	var n notificationBody
	if err := json.Unmarshal(body, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// settled reports whether every delivery of n has a terminal status.
func (n notificationBody) settled() bool {
	for _, d := range n.Deliveries {
		if d.Status == "queued" || d.Status == "sending" {
			return false
		}
	}
	return len(n.Deliveries) > 0
}

func TestNotificationAPI(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.AllowPrivate = true
	n := startNode(t, cfg)
	base := n.httpURL

	body := `{"request_id":"order-9001-shipped","user_id":"u1","type":"order.shipped","data":{"order":"#42","name":"Ann"},"expires_at":"2099-12-01T10:00:00Z"}`
	code, resp := call(t, "POST", base+"/v1/notifications", body)
	var acc struct {
		NotificationID string `json:"notification_id"`
		Status         string
	}
	if err := json.Unmarshal(resp, &acc); code != 202 || err != nil || acc.Status != "accepted" || !strings.HasPrefix(acc.NotificationID, "ntf_") {
		t.Fatalf("POST = %d %s, want 202 accepted", code, resp)
	}
	if code, again := call(t, "POST", base+"/v1/notifications", body); code != 200 || !bytes.Equal(again, resp) {
		t.Errorf("repeat POST = %d %s, want 200 with the same answer", code, again)
	}
	if code, resp := call(t, "POST", base+"/v1/notifications", strings.Replace(body, "#42", "#43", 1)); code != 409 {
		t.Errorf("same request_id, other body = %d %s, want 409", code, resp)
	}
	hdr := `{"user_id":"u1","type":"otp","data":{"code":"123456"}}`
	_, first := call(t, "POST", base+"/v1/notifications", hdr, "Idempotency-Key", "login-77")
	if code, second := call(t, "POST", base+"/v1/notifications", hdr, "Idempotency-Key", "login-77"); code != 200 || !bytes.Equal(first, second) {
		t.Errorf("Idempotency-Key repeat = %d %s, want 200 %s", code, second, first)
	}

	enginetest.EventuallyNil(t, 10*time.Second, "deliveries settle", func() error {
		got := getNotification(t, base, acc.NotificationID)
		return enginetest.State(got.settled(), "%s", fmt.Sprint(got.Deliveries))
	})
	got := getNotification(t, base, acc.NotificationID)
	want := map[string]string{"email": "sent", "sms": "sent", "push": "sent", "webhook": "suppressed", "inapp": "sent"}
	for _, d := range got.Deliveries {
		if want[d.Channel] != d.Status {
			t.Errorf("delivery %s = %s, want %s", d.Channel, d.Status, want[d.Channel])
		}
	}
	code, resp = call(t, "GET", base+"/v1/outbox?user_id=u1&limit=10", "")
	if code != 200 || !strings.Contains(string(resp), `"subject":"Order #42 shipped"`) {
		t.Errorf("outbox = %d %s, want the rendered email", code, resp)
	}
	code, resp = call(t, "GET", base+"/v1/users/u1/notifications?limit=1", "")
	var page struct {
		Items      []notificationBody
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(resp, &page); code != 200 || err != nil || len(page.Items) != 1 || page.NextCursor == "" {
		t.Fatalf("history page 1 = %d %s", code, resp)
	}
	code, resp = call(t, "GET", base+"/v1/users/u1/notifications?limit=1&cursor="+page.NextCursor, "")
	var page2 struct{ Items []notificationBody }
	if err := json.Unmarshal(resp, &page2); code != 200 || err != nil || len(page2.Items) != 1 || page2.Items[0].ID != acc.NotificationID {
		t.Errorf("history page 2 = %d %s, want the order (older than the OTP)", code, resp)
	}
	if code, resp := call(t, "GET", base+"/v1/users/u1/notifications?cursor=garbage", ""); code != 400 {
		t.Errorf("bad cursor = %d %s, want 400", code, resp)
	}
}

func TestNotificationBadInput(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	base := n.httpURL
	tests := []struct {
		name  string
		body  string
		code  int
		field string
	}{
		{"missing user_id", `{"type":"otp"}`, 422, "user_id"},
		{"missing type", `{"user_id":"u1"}`, 422, "type"},
		{"unknown type", `{"user_id":"u1","type":"telepathy"}`, 422, "type"},
		{"malformed expires_at", `{"user_id":"u1","type":"otp","expires_at":"tomorrow"}`, 400, "expires_at"},
		{"data over 64 KiB", `{"user_id":"u1","type":"otp","data":{"x":"` + strings.Repeat("a", 65<<10) + `"}}`, 422, "data"},
		{"request_id over 255", `{"request_id":"` + strings.Repeat("r", 256) + `","user_id":"u1","type":"otp"}`, 422, "request_id"},
		{"unknown field", `{"user_id":"u1","type":"otp","priority":"high"}`, 400, "priority"},
		{"wrong type", `{"user_id":1,"type":"otp"}`, 400, "user_id"},
		{"unknown channel", `{"user_id":"u1","type":"otp","channels":["fax"]}`, 422, "channels[0]"},
	}
	for _, tt := range tests {
		code, body := call(t, "POST", base+"/v1/notifications", tt.body)
		if code != tt.code || !strings.Contains(fmt.Sprint(fieldsOf(body)), tt.field) {
			t.Errorf("%s: %d %s, want %d naming %s", tt.name, code, body, tt.code, tt.field)
		}
	}
	if code, _ := call(t, "POST", base+"/v1/notifications", `{"user_id":"u1","type":"otp","data":{"x":"`+strings.Repeat("a", 2<<20)+`"}}`); code != 413 {
		t.Errorf("2 MiB body = %d, want 413", code)
	}
	_, resp := call(t, "GET", base+"/v1/users/u1/notifications", "")
	if !strings.Contains(string(resp), `"items":[]`) {
		t.Errorf("after refused requests the history is %s, want empty", resp)
	}
	_, resp = call(t, "GET", base+"/v1/outbox", "")
	if !strings.Contains(string(resp), `"items":[]`) {
		t.Errorf("after refused requests the outbox is %s, want empty", resp)
	}
}

func TestSettingsAndTemplatesAPI(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	base := n.httpURL
	code, resp := call(t, "GET", base+"/v1/users/u9/settings", "")
	if code != 200 || !strings.Contains(string(resp), `"webhook":false`) || !strings.Contains(string(resp), `"marketing":true`) {
		t.Errorf("default settings = %d %s", code, resp)
	}
	tests := []struct {
		name  string
		body  string
		code  int
		field string
	}{
		{"critical off", `{"categories":{"critical":false}}`, 422, "categories.critical"},
		{"every channel off", `{"channels":{"email":false,"sms":false,"push":false,"webhook":false,"inapp":false}}`, 422, "channels"},
		{"bad timezone", `{"timezone":"Nowhere/Else"}`, 422, "timezone"},
		{"unknown field", `{"colour":"red"}`, 400, "colour"},
		{"unknown contact field", `{"contacts":{"fax":"1"}}`, 400, "fax"},
		{"valid", `{"channels":{"sms":false},"categories":{"marketing":false},"contacts":{"email":"ann@example.com","phone":"+14155550100"},"locale":"de","timezone":"Europe/Berlin","quiet_hours":{"start":"22:00","end":"07:00"}}`, 200, ""},
	}
	for _, tt := range tests {
		code, body := call(t, "PUT", base+"/v1/users/u9/settings", tt.body)
		if code != tt.code || !strings.Contains(fmt.Sprint(fieldsOf(body)), tt.field) {
			t.Errorf("%s: %d %s, want %d naming %q", tt.name, code, body, tt.code, tt.field)
		}
	}
	_, resp = call(t, "GET", base+"/v1/users/u9/settings", "")
	for _, want := range []string{`"sms":false`, `"marketing":false`, `"email":"ann@example.com"`, `"timezone":"Europe/Berlin"`, `"start":"22:00"`} {
		if !strings.Contains(string(resp), want) {
			t.Errorf("stored settings %s lack %s", resp, want)
		}
	}

	code, resp = call(t, "GET", base+"/v1/templates/otp", "")
	if code != 200 || !strings.Contains(string(resp), `"default":true`) || !strings.Contains(string(resp), `"category":"critical"`) {
		t.Errorf("GET default template = %d %s", code, resp)
	}
	if code, _ := call(t, "GET", base+"/v1/templates/nope", ""); code != 404 {
		t.Errorf("GET unknown template = %d, want 404", code)
	}
	put := `{"channels":{"default":{"en":{"subject":"Code","body":"Use {code}"},"de":{"subject":"Code","body":"Nutze {code}"}}}}`
	if code, resp := call(t, "PUT", base+"/v1/templates/otp", put); code != 200 {
		t.Fatalf("PUT template = %d %s", code, resp)
	}
	if code, resp := call(t, "PUT", base+"/v1/templates/invoice.html", `{"category":"orders","channels":{"email":{"en":{"body":"x","html":"<p>{n}</p>"}}}}`); code != 200 || !strings.Contains(string(resp), `"html":"\u003cp\u003e{n}\u003c/p\u003e"`) {
		t.Errorf("PUT a template with an HTML part = %d %s, want it returned", code, resp)
	}
	if code, resp := call(t, "GET", base+"/v1/templates/order.shipped", ""); code != 200 || !strings.Contains(string(resp), `"html":"\u003c!doctype html\u003e`) {
		t.Errorf("GET a shipped template = %d %s, want its HTML part", code, resp)
	}
	if code, resp := call(t, "PUT", base+"/v1/templates/invoice.html", `{"category":"orders","channels":{"sms":{"en":{"body":"x","html":"<p>x</p>"}}}}`); code != 422 || !strings.Contains(string(resp), "channels.sms.en.html") {
		t.Errorf("PUT an SMS text with an HTML part = %d %s, want 422 naming the field", code, resp)
	}
	if code, resp := call(t, "PUT", base+"/v1/templates/otp", `{"channels":{"fax":{"en":{"body":"x"}}}}`); code != 422 {
		t.Errorf("PUT template with an unknown channel = %d %s, want 422", code, resp)
	}
	if code, resp := call(t, "PUT", base+"/v1/templates/invoice.ready", `{"channels":{"default":{"en":{"body":"x"}}}}`); code != 422 {
		t.Errorf("PUT a new type without a category = %d %s, want 422", code, resp)
	}
	if code, resp := call(t, "PUT", base+"/v1/templates/invoice.ready", `{"category":"orders","channels":{"default":{"en":{"body":"Invoice {n}"}}}}`); code != 200 {
		t.Errorf("PUT a new type = %d %s", code, resp)
	}
	code, resp = call(t, "POST", base+"/v1/notifications", `{"user_id":"u9","type":"otp","data":{"code":"999"},"channels":["email"]}`)
	if code != 202 {
		t.Fatalf("POST = %d %s", code, resp)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "the German text in the outbox", func() error {
		_, out := call(t, "GET", base+"/v1/outbox?user_id=u9", "")
		return enginetest.State(strings.Contains(string(out), `"body":"Nutze 999"`), "%s", string(out))
	})
	if code, resp := call(t, "POST", base+"/v1/notifications", `{"user_id":"u9","type":"invoice.ready"}`); code != 202 {
		t.Errorf("POST of a type defined by PUT = %d %s, want 202", code, resp)
	}
}

func TestDeadLetterReplay(t *testing.T) {
	t.Parallel()
	hook := enginetest.StartWebhookReceiver(t, http.StatusGone)
	cfg := testConfig(t)
	cfg.AllowPrivate = true
	n := startNode(t, cfg)
	base := n.httpURL
	if code, resp := call(t, "PUT", base+"/v1/users/u1/settings", `{"contacts":{"webhook_url":"`+hook.URL+`/hook"}}`); code != 200 {
		t.Fatalf("PUT settings = %d %s", code, resp)
	}
	_, resp := call(t, "POST", base+"/v1/notifications", `{"user_id":"u1","type":"payment_failed","channels":["webhook"]}`)
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	_ = json.Unmarshal(resp, &acc)
	var dl struct {
		Items []struct{ ID, NotificationID, Channel, Error string }
	}
	enginetest.EventuallyNil(t, 10*time.Second, "a dead letter", func() error {
		_, body := call(t, "GET", base+"/v1/dead-letters", "")
		_ = json.Unmarshal(body, &dl)
		return enginetest.State(len(dl.Items) == 1, "%s", string(body))
	})
	if d := getNotification(t, base, acc.NotificationID).Deliveries[0]; d.Status != "dead" || !strings.Contains(d.Error, "410") {
		t.Errorf("delivery after a 410 = %+v, want dead with the answer", d)
	}
	hook.SetStatus(http.StatusNoContent)
	if code, resp := call(t, "POST", base+"/v1/dead-letters/"+dl.Items[0].ID+"/replay", ""); code != 202 {
		t.Fatalf("replay = %d %s", code, resp)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "the replayed delivery sent", func() error {
		d := getNotification(t, base, acc.NotificationID).Deliveries[0]
		return enginetest.State(d.Status == "sent" && d.Attempts == 2, "%s", fmt.Sprint(d))
	})
	if code, _ := call(t, "POST", base+"/v1/dead-letters/"+dl.Items[0].ID+"/replay", ""); code != 409 {
		t.Errorf("second replay = %d, want 409", code)
	}
	if code, _ := call(t, "POST", base+"/v1/dead-letters/dl_nope/replay", ""); code != 404 {
		t.Errorf("replay of an unknown id = %d, want 404", code)
	}
	if unique, total := hook.Counts(); unique != 1 || total != 2 {
		t.Errorf("receiver saw %d ids in %d requests, want 1 id twice (the id is stable across attempts)", unique, total)
	}
}
