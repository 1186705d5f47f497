package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestCancelAPI: DELETE /v1/notifications/{id} on a running node cancels
// deliveries waiting for the end of quiet hours, answers the same when
// repeated, shows canceled in GET and the metrics, leaves a sent one
// alone (not_canceled) and answers 404 for an unknown id.
func TestCancelAPI(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	n := startNode(t, cfg)
	base := n.httpURL

	now := time.Now().UTC()
	quiet := fmt.Sprintf(`{"quiet_hours":{"start":"%s","end":"%s"}}`, now.Add(-time.Hour).Format("15:04"), now.Add(2*time.Hour).Format("15:04"))
	if code, body := call(t, "PUT", base+"/v1/users/sleeper/settings", quiet); code != 200 {
		t.Fatalf("PUT settings = %d %s", code, body)
	}
	code, body := call(t, "POST", base+"/v1/notifications", `{"user_id":"sleeper","type":"order.shipped","data":{"order":"#1"},"channels":["email","sms"]}`)
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	if err := json.Unmarshal(body, &acc); code != 202 || err != nil {
		t.Fatalf("POST = %d %s", code, body)
	}
	code, first := call(t, "DELETE", base+"/v1/notifications/"+acc.NotificationID, "")
	var got struct {
		Outcome    string
		Deliveries []deliveryBody
	}
	if err := json.Unmarshal(first, &got); code != 200 || err != nil || got.Outcome != "canceled" || len(got.Deliveries) != 2 {
		t.Fatalf("DELETE = %d %s, want 200 canceled with two deliveries", code, first)
	}
	for _, d := range got.Deliveries {
		if d.Status != "canceled" {
			t.Errorf("delivery %s = %s, want canceled", d.Channel, d.Status)
		}
	}
	if code, again := call(t, "DELETE", base+"/v1/notifications/"+acc.NotificationID, ""); code != 200 || !bytes.Equal(again, first) {
		t.Errorf("repeated DELETE = %d %s, want 200 %s", code, again, first)
	}
	for _, d := range getNotification(t, base, acc.NotificationID).Deliveries {
		if d.Status != "canceled" {
			t.Errorf("GET: delivery %s = %s, want canceled", d.Channel, d.Status)
		}
	}
	_, metrics := get(t, base+"/metrics")
	if !strings.Contains(string(metrics), `sluice_notify_deliveries_total{category="orders",channel="email",status="canceled"} 1`) {
		t.Error("metrics lack the canceled email delivery")
	}

	// Sent already: nothing to cancel.
	code, body = call(t, "POST", base+"/v1/notifications", `{"user_id":"awake","type":"order.shipped","data":{"order":"#2"},"channels":["email"]}`)
	if err := json.Unmarshal(body, &acc); code != 202 || err != nil {
		t.Fatalf("POST = %d %s", code, body)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "the email sent", func() error {
		got := getNotification(t, base, acc.NotificationID)
		return enginetest.State(got.settled(), "%s", fmt.Sprint(got.Deliveries))
	})
	code, body = call(t, "DELETE", base+"/v1/notifications/"+acc.NotificationID, "")
	if err := json.Unmarshal(body, &got); code != 200 || err != nil || got.Outcome != "not_canceled" || got.Deliveries[0].Status != "sent" {
		t.Errorf("DELETE of a sent notification = %d %s, want 200 not_canceled, sent", code, body)
	}
	if code, body := call(t, "DELETE", base+"/v1/notifications/ntf_nope", ""); code != 404 {
		t.Errorf("DELETE unknown = %d %s, want 404", code, body)
	}
}
