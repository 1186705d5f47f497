package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify/webhook"
)

// TestSlowReceiverIsCalledOnce: a webhook receiver that takes three ack
// waits to answer its first call, two nodes sharing one PostgreSQL schema
// and one NATS stream prefix. JetStream hands the unacknowledged job out
// again meanwhile, to either node; the copy finds the delivery claimed
// (sending, shown by the API) and waits, so the receiver is called once.
func TestSlowReceiverIsCalledOnce(t *testing.T) {
	t.Parallel()
	const ackWait = time.Second
	var (
		mu    sync.Mutex
		calls = map[string]int{} // webhook-id -> requests
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.Header.Get("webhook-id")]++
		first := calls[r.Header.Get("webhook-id")] == 1
		mu.Unlock()
		if first {
			time.Sleep(3 * ackWait) // the slow receiver under test, not a wait for a condition
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)

	cfg := testConfig(t)
	cfg.AllowPrivate = true
	cfg.Notify.AckWait = ackWait
	cfg.Notify.Webhook.Secret = webhook.NewSecret()
	a, b := startTwoNodes(t, cfg)

	settings := fmt.Sprintf(`{"channels":{"webhook":true},"contacts":{"webhook_url":"%s/slow"}}`, hook.URL)
	if code, body := send(t, "PUT", a.httpURL+"/v1/users/slow/settings", settings); code != 200 {
		t.Fatalf("PUT settings = %d %v", code, body)
	}
	code, body := send(t, "POST", a.httpURL+"/v1/notifications",
		`{"user_id":"slow","type":"order.shipped","data":{"order":"#7"},"channels":["webhook"]}`)
	if code != 202 {
		t.Fatalf("POST notification = %d %v", code, body)
	}
	id := body["notification_id"].(string)
	status := func(n *testNode) string {
		code, raw := get(t, n.httpURL+"/v1/notifications/"+id)
		var rec struct {
			Deliveries []struct {
				Channel string `json:"channel"`
				Status  string `json:"status"`
			} `json:"deliveries"`
		}
		if code != 200 || json.Unmarshal(raw, &rec) != nil || len(rec.Deliveries) != 1 {
			return fmt.Sprint(code, " ", string(raw))
		}
		return rec.Deliveries[0].Status
	}
	enginetest.EventuallyNil(t, 10*time.Second, "the other node shows the delivery sending", func() error {
		s := status(b)
		return enginetest.State(s == "sending", "%s", s)
	})
	enginetest.EventuallyNil(t, 30*time.Second, "the delivery sent", func() error {
		s := status(a)
		return enginetest.State(s == "sent", "%s", s)
	})
	// Copies handed out during the call come back every couple of
	// seconds until they read the outcome; the queue is settled when it
	// holds no job unacknowledged.
	enginetest.EventuallyNil(t, 30*time.Second, "every copy of the job acknowledged", func() error {
		code, raw := get(t, a.httpURL+"/metrics")
		_, rest, _ := strings.Cut(string(raw), `sluice_notify_queue_oldest_job_seconds{category="orders",channel="webhook"} `)
		v, _, _ := strings.Cut(rest, "\n")
		age, err := strconv.ParseFloat(v, 64)
		return enginetest.State(code == 200 && err == nil && age < 0.5, "oldest job %q seconds old", v)
	})
	mu.Lock()
	defer mu.Unlock()
	if n := calls[id+":webhook"]; n != 1 {
		t.Errorf("receiver called %d times for one delivery, want 1 (calls: %v)", n, calls)
	}
}
