package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// outboxBody is a page of GET /v1/outbox.
type outboxBody struct{ Items []client.OutboxEntry }

func outboxOf(t *testing.T, base, user string) outboxBody {
	t.Helper()
	code, body := call(t, "GET", base+"/v1/outbox?user_id="+user+"&limit=200", "")
	var out outboxBody
	if err := json.Unmarshal(body, &out); code != 200 || err != nil {
		t.Fatalf("GET outbox = %d %s", code, body)
	}
	return out
}

// TestDigestAPI runs a digest through a real node: the template's rule set
// over HTTP, three events inside a window, one message in the outbox, and
// both sides on the notifications' timelines.
func TestDigestAPI(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	base := n.httpURL
	tpl := `{"category":"marketing","channels":{"default":{"en":{"subject":"{count} news","body":"{count} news:\n{items}"}}},` +
		`"digest":{"window":"2s","max_items":10,"item":"- {title}"}}`
	if code, resp := call(t, "PUT", base+"/v1/templates/news", tpl); code != 200 || !strings.Contains(string(resp), `"digest":{"window":"2s","max_items":10,"item":"- {title}"}`) {
		t.Fatalf("PUT template = %d %s", code, resp)
	}
	if code, resp := call(t, "PUT", base+"/v1/templates/news", strings.Replace(tpl, `"2s"`, `"forever"`, 1)); code != 422 ||
		!strings.Contains(strings.Join(fieldsOf(resp), ","), "digest.window") {
		t.Errorf("PUT template with a bad window = %d %s, want 422 naming digest.window", code, resp)
	}
	var events []string
	for _, title := range []string{"a", "b", "c"} {
		code, resp := call(t, "POST", base+"/v1/notifications", fmt.Sprintf(`{"user_id":"u1","type":"news","data":{"title":%q},"channels":["email"]}`, title))
		var acc struct {
			NotificationID string `json:"notification_id"`
		}
		if err := json.Unmarshal(resp, &acc); code != 202 || err != nil {
			t.Fatalf("POST = %d %s", code, resp)
		}
		events = append(events, acc.NotificationID)
	}
	var msg string
	enginetest.EventuallyNil(t, 15*time.Second, "the digest in the outbox", func() error {
		out := outboxOf(t, base, "u1")
		if len(out.Items) == 1 {
			msg = out.Items[0].NotificationID
		}
		return enginetest.State(len(out.Items) == 1 && out.Items[0].Body == "3 news:\n- a\n- b\n- c" && out.Items[0].Subject == "3 news", "%s", fmt.Sprint(out.Items))
	})
	type digestBody struct {
		Count          int
		NotificationID string `json:"notification_id"`
		Items          []struct {
			NotificationID string `json:"notification_id"`
		}
	}
	var rec struct {
		RequestID  string `json:"request_id"`
		Deliveries []deliveryBody
		Digests    []digestBody
	}
	_, body := call(t, "GET", base+"/v1/notifications/"+msg, "")
	if err := json.Unmarshal(body, &rec); err != nil || len(rec.Digests) != 1 || rec.Digests[0].Count != 3 ||
		len(rec.Digests[0].Items) != 3 || rec.Digests[0].Items[2].NotificationID != events[2] || !strings.HasPrefix(rec.RequestID, "digest:") {
		t.Errorf("the message's timeline = %s", body)
	}
	_, body = call(t, "GET", base+"/v1/notifications/"+events[0], "")
	rec.Digests = nil
	if err := json.Unmarshal(body, &rec); err != nil || len(rec.Deliveries) != 1 || rec.Deliveries[0].Status != "suppressed" ||
		rec.Deliveries[0].Error != "digested" || len(rec.Digests) != 1 || rec.Digests[0].NotificationID != msg {
		t.Errorf("an event's timeline = %s", body)
	}
	if out := outboxOf(t, base, "u1"); len(out.Items) != 1 {
		t.Errorf("%d outbox entries, want the one digest", len(out.Items))
	}
}

// TestEscalationAPI: a type that escalates to SMS sends its email at once
// and the SMS once the wait is over, on a real node's scheduler.
func TestEscalationAPI(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	base := n.httpURL
	tpl := `{"category":"orders","channels":{"default":{"en":{"subject":"Order {order}","body":"Order {order} needs you"}}},` +
		`"escalation":{"after":"2s","unless":["delivered","clicked"],"to":["sms"]}}`
	if code, resp := call(t, "PUT", base+"/v1/templates/alert", tpl); code != 200 || !strings.Contains(string(resp), `"escalation":{"after":"2s"`) {
		t.Fatalf("PUT template = %d %s", code, resp)
	}
	if code, resp := call(t, "GET", base+"/v1/templates/alert", ""); code != 200 || !strings.Contains(string(resp), `"to":["sms"]`) {
		t.Errorf("GET template = %d %s", code, resp)
	}
	if code, resp := call(t, "PUT", base+"/v1/templates/alert", strings.Replace(tpl, `"sms"`, `"fax"`, 1)); code != 422 ||
		!strings.Contains(strings.Join(fieldsOf(resp), ","), "escalation.to[0]") {
		t.Errorf("PUT template escalating to fax = %d %s, want 422 naming escalation.to[0]", code, resp)
	}
	code, resp := call(t, "POST", base+"/v1/notifications", `{"user_id":"u2","type":"alert","data":{"order":"#7"},"channels":["email"]}`)
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	if err := json.Unmarshal(resp, &acc); code != 202 || err != nil {
		t.Fatalf("POST = %d %s", code, resp)
	}
	got := getNotification(t, base, acc.NotificationID)
	if len(got.Deliveries) != 2 || got.Deliveries[1].Channel != "sms" || got.Deliveries[1].Status != "queued" ||
		got.Deliveries[1].Error != "escalation: unless delivered,clicked" {
		t.Fatalf("deliveries right after acceptance = %+v; want the SMS held back", got.Deliveries)
	}
	enginetest.EventuallyNil(t, 15*time.Second, "the escalated SMS in the outbox", func() error {
		out := outboxOf(t, base, "u2")
		return enginetest.State(len(out.Items) == 2, "%s", fmt.Sprint(out.Items))
	})
	out := outboxOf(t, base, "u2")
	email, sms := out.Items[1], out.Items[0] // newest first
	if email.Channel != "email" || sms.Channel != "sms" || sms.CreatedAt.Sub(email.CreatedAt) < time.Second {
		t.Errorf("outbox = %+v; want the email, then the SMS after the wait", out.Items)
	}
}
