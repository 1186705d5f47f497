package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify/webhook"
)

// eventReceiver is an event subscription's endpoint: it verifies every
// request's Standard Webhooks signature with the subscription's secret and
// keeps what arrived; its answer is status, or 500 while failNext > 0.
type eventReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	key      []byte
	status   int
	failNext int // answer 500 to this many requests of type failType
	failType string
	bad      int                        // requests whose signature did not verify
	hits     map[string]int             // webhook-id -> requests
	events   map[string]receivedEvent   // webhook-id -> body
	byType   map[string][]receivedEvent // type -> first arrivals
	requests int
}

type receivedEvent struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

func (e receivedEvent) field(name string) string {
	var m map[string]any
	_ = json.Unmarshal(e.Data, &m)
	return fmt.Sprint(m[name])
}

func newEventReceiver(t *testing.T) *eventReceiver {
	h := &eventReceiver{status: http.StatusNoContent, hits: map[string]int{}, events: map[string]receivedEvent{},
		byType: map[string][]receivedEvent{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.requests++
		if h.key == nil || !webhook.Verify(h.key, id, ts, body, r.Header.Get("webhook-signature")) {
			h.bad++
		}
		h.hits[id]++
		var e receivedEvent
		_ = json.Unmarshal(body, &e)
		if h.failNext > 0 && e.Type == h.failType {
			h.failNext--
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if h.status >= 300 {
			w.WriteHeader(h.status)
			return
		}
		if _, ok := h.events[id]; !ok && e.ID == id {
			h.events[id] = e
			h.byType[e.Type] = append(h.byType[e.Type], e)
		}
		w.WriteHeader(h.status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *eventReceiver) set(f func(h *eventReceiver)) { h.mu.Lock(); f(h); h.mu.Unlock() }

// find returns the first event of type typ whose data has notification_id
// (or link_id) id.
func (h *eventReceiver) find(typ, field, id string) (receivedEvent, int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.byType[typ] {
		if e.field(field) == id {
			return e, h.hits[e.ID], true
		}
	}
	return receivedEvent{}, 0, false
}

type eventSubBody struct {
	ID, URL, Secret, Status string
	LastError               string `json:"last_error"`
	Events                  []string
	Failures                int
	DisabledReason          string `json:"disabled_reason"`
	DisableAfter            string `json:"disable_after"`
}

func subscribe(t *testing.T, base string, h *eventReceiver, body string) eventSubBody {
	t.Helper()
	code, resp := call(t, "POST", base+"/v1/event-subscriptions", strings.Replace(body, "URL", h.URL+"/events", 1))
	var sub eventSubBody
	if err := json.Unmarshal(resp, &sub); code != 201 || err != nil || !strings.HasPrefix(sub.Secret, "whsec_") {
		t.Fatalf("POST /v1/event-subscriptions = %d %s", code, resp)
	}
	key, err := webhook.DecodeSecret(sub.Secret)
	if err != nil {
		t.Fatal(err)
	}
	h.set(func(h *eventReceiver) { h.key = key })
	return sub
}

func getSub(t *testing.T, base, id string) eventSubBody {
	t.Helper()
	_, resp := call(t, "GET", base+"/v1/event-subscriptions/"+id, "")
	var sub eventSubBody
	_ = json.Unmarshal(resp, &sub)
	return sub
}

func sendTo(t *testing.T, base, user string) string {
	t.Helper()
	code, resp := call(t, "POST", base+"/v1/notifications", `{"user_id":"`+user+`","type":"payment_failed","channels":["webhook"]}`)
	var acc struct {
		NotificationID string `json:"notification_id"`
	}
	if err := json.Unmarshal(resp, &acc); code != 202 || err != nil {
		t.Fatalf("POST /v1/notifications = %d %s", code, resp)
	}
	return acc.NotificationID
}

func eventsConfig(t *testing.T) config.Config {
	cfg := testConfig(t)
	cfg.Notify.Events.DisableAfter = 120 * time.Hour
	cfg.AllowPrivate = true
	cfg.Notify.Retry.Orders.Base, cfg.Notify.Retry.Orders.Cap, cfg.Notify.Retry.Orders.Attempts = 20*time.Millisecond, 100*time.Millisecond, 4
	cfg.Links.FlushInterval = 50 * time.Millisecond
	return cfg
}

func TestStatusEventsSQLite(t *testing.T) {
	t.Parallel()
	testStatusEvents(t, eventsConfig(t))
}

func TestStatusEventsPostgres(t *testing.T) {
	t.Parallel()
	cfg := eventsConfig(t)
	cfg.DatabaseURL = enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	testStatusEvents(t, cfg)
}

// testStatusEvents runs status events end to end on a real node: signed
// deliveries with the subscription's secret, retries after 500s under one
// webhook-id, a subscription disabled after its run of failures (and its
// own failures reporting no events), recover resending what it missed,
// and link.clicked for people only.
func testStatusEvents(t *testing.T, cfg config.Config) {
	start := time.Now().UTC().Add(-time.Second)
	n := startNode(t, cfg)
	base := n.httpURL
	userHook := enginetest.StartWebhookReceiver(t, http.StatusNoContent)
	if code, resp := call(t, "PUT", base+"/v1/users/u1/settings", `{"contacts":{"webhook_url":"`+userHook.URL+`/hook"}}`); code != 200 {
		t.Fatalf("PUT settings = %d %s", code, resp)
	}
	good := newEventReceiver(t)
	goodSub := subscribe(t, base, good, `{"url":"URL","events":["notification.accepted","delivery.sent","delivery.dead","link.clicked"]}`)
	bad := newEventReceiver(t)
	bad.set(func(h *eventReceiver) { h.status = http.StatusServiceUnavailable })
	badSub := subscribe(t, base, bad, `{"url":"URL","events":["delivery.sent"],"disable_after_failures":3}`)

	// Accepted and sent, each signed with the subscription's secret; the
	// first two attempts at delivery.sent answer 500 and are retried under
	// the same webhook-id.
	id1 := sendTo(t, base, "u1")
	var acc receivedEvent
	enginetest.EventuallyNil(t, 10*time.Second, "notification.accepted", func() error {
		e, _, ok := good.find("notification.accepted", "notification_id", id1)
		acc = e
		return enginetest.State(ok, "%s", "")
	})
	if acc.field("user_id") != "u1" || !strings.HasPrefix(acc.ID, "evt_") {
		t.Errorf("notification.accepted = %+v", acc)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "delivery.sent", func() error {
		_, _, ok := good.find("delivery.sent", "notification_id", id1)
		return enginetest.State(ok, "%s", "")
	})
	good.set(func(h *eventReceiver) { h.failNext, h.failType = 2, "delivery.sent" })
	id2 := sendTo(t, base, "u1")
	var hits int
	enginetest.EventuallyNil(t, 10*time.Second, "delivery.sent after two 500s", func() error {
		var ok bool
		_, hits, ok = good.find("delivery.sent", "notification_id", id2)
		return enginetest.State(ok, "%s", "")
	})
	if hits < 3 {
		t.Errorf("delivery.sent after two 500s reached the receiver %d times under its webhook-id, want 3 or more", hits)
	}

	// The failing subscription is disabled after 3 failed attempts, with
	// the reason on GET, and gets nothing more.
	enginetest.EventuallyNil(t, 10*time.Second, "the failing subscription disabled", func() error {
		s := getSub(t, base, badSub.ID)
		return enginetest.State(s.Status == "disabled", "%+v", s)
	})
	enginetest.EventuallyNil(t, 10*time.Second, "the disabled subscription's dead letter", func() error {
		_, body := call(t, "GET", base+"/v1/dead-letters", "")
		return enginetest.State(strings.Contains(string(body), "sluice:"+badSub.ID), "%s", string(body))
	})
	s := getSub(t, base, badSub.ID)
	if !strings.Contains(s.DisabledReason, "3 consecutive failed attempts") || !strings.Contains(s.LastError, "503") || s.Secret != "" ||
		s.DisableAfter != "120h0m0s" {
		t.Errorf("disabled subscription = %+v, want the reason, the last error and no secret", s)
	}
	bad.set(func(h *eventReceiver) { h.status = http.StatusNoContent })
	var before int
	bad.set(func(h *eventReceiver) { before = h.requests })
	id3 := sendTo(t, base, "u1")
	enginetest.EventuallyNil(t, 10*time.Second, "delivery.sent of a third notification", func() error {
		_, _, ok := good.find("delivery.sent", "notification_id", id3)
		return enginetest.State(ok, "%s", "")
	})
	// Its dead deliveries are dead letters but report no delivery.dead.
	good.mu.Lock()
	for _, e := range good.byType["delivery.dead"] {
		if strings.HasPrefix(e.field("user_id"), "sluice:") {
			t.Errorf("a system delivery reported an event: %+v", e)
		}
	}
	good.mu.Unlock()
	bad.set(func(h *eventReceiver) {
		if h.requests != before {
			t.Errorf("the disabled subscription was called %d times after it was disabled", h.requests-before)
		}
	})

	// Recover enables it and resends everything since start, the third
	// notification's delivery.sent included.
	code, resp := call(t, "POST", base+"/v1/event-subscriptions/"+badSub.ID+"/recover?since="+start.Format(time.RFC3339Nano), "")
	var rec struct{ Queued int }
	if err := json.Unmarshal(resp, &rec); code != 202 || err != nil || rec.Queued < 3 {
		t.Fatalf("recover = %d %s, want 3 or more queued", code, resp)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "recovered events", func() error {
		ok := true
		for _, id := range []string{id1, id2, id3} {
			_, _, found := bad.find("delivery.sent", "notification_id", id)
			ok = ok && found
		}
		return enginetest.State(ok, "%s", "")
	})
	if s := getSub(t, base, badSub.ID); s.Status != "enabled" || s.Failures != 0 {
		t.Errorf("after recover: %+v, want enabled", s)
	}
	// Its dead letters replay through the usual route once it is enabled.
	_, body := call(t, "GET", base+"/v1/dead-letters", "")
	var dls struct {
		Items []struct {
			ID     string
			UserID string `json:"user_id"`
		}
	}
	_ = json.Unmarshal(body, &dls)
	replayed := ""
	for _, dl := range dls.Items {
		if dl.UserID == "sluice:"+badSub.ID && replayed == "" {
			if code, resp := call(t, "POST", base+"/v1/dead-letters/"+dl.ID+"/replay", ""); code == 202 &&
				strings.Contains(string(resp), "webhook") {
				replayed = dl.ID
			}
		}
	}
	if replayed == "" {
		t.Fatalf("no dead letter of the disabled subscription replayed: %s", body)
	}
	bad.set(func(h *eventReceiver) { before = h.requests })
	enginetest.EventuallyNil(t, 10*time.Second, "the replayed event", func() error {
		var n int
		bad.set(func(h *eventReceiver) { n = h.requests })
		return enginetest.State(n > before, "%s", "")
	})
	// Its deliveries are a system user's notifications, listed as any.
	if code, body := call(t, "GET", base+"/v1/users/sluice:"+badSub.ID+"/notifications", ""); code != 200 ||
		!strings.Contains(string(body), `"delivery.sent"`) {
		t.Errorf("GET the subscription's notifications = %d %.300s", code, body)
	}
	if code, resp := call(t, "POST", base+"/v1/event-subscriptions/"+badSub.ID+"/recover?since=2020-01-01T00:00:00Z", ""); code != 422 ||
		!strings.Contains(string(resp), "since") {
		t.Errorf("recover before the retention = %d %s, want 422 naming since", code, resp)
	}

	// link.clicked for a person, not for a bot.
	code, resp = call(t, "POST", base+"/v1/links", `{"url":"https://example.com/events"}`)
	var link struct{ Code string }
	if err := json.Unmarshal(resp, &link); code != 201 || err != nil {
		t.Fatalf("POST /v1/links = %d %s", code, resp)
	}
	for _, ua := range []string{"curl/8.0", "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0"} {
		req, _ := http.NewRequest("GET", base+"/"+link.Code, nil)
		req.Header.Set("User-Agent", ua)
		r, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
	}
	enginetest.EventuallyNil(t, 10*time.Second, "link.clicked", func() error {
		good.mu.Lock()
		defer good.mu.Unlock()
		return enginetest.State(len(good.byType["link.clicked"]) > 0, "%s", "")
	})
	// curl's hit came first, so it was flushed with the person's or before.
	good.mu.Lock()
	if clicks := good.byType["link.clicked"]; len(clicks) != 1 || clicks[0].field("code") != link.Code {
		t.Errorf("link.clicked events = %+v, want 1 for code %s (the person's, not curl's)", clicks, link.Code)
	}
	good.mu.Unlock()

	good.mu.Lock()
	if good.bad != 0 {
		t.Errorf("%d requests to the good receiver failed signature verification", good.bad)
	}
	good.mu.Unlock()
	bad.mu.Lock()
	if bad.bad != 0 {
		t.Errorf("%d requests to the failing receiver failed signature verification", bad.bad)
	}
	bad.mu.Unlock()

	if code, _ := call(t, "DELETE", base+"/v1/event-subscriptions/"+goodSub.ID, ""); code != 204 {
		t.Errorf("DELETE = %d", code)
	}
	if code, _ := call(t, "GET", base+"/v1/event-subscriptions/"+goodSub.ID, ""); code != 404 {
		t.Errorf("GET after DELETE = %d, want 404", code)
	}
}

func decodeSecretForTest(secret string) ([]byte, error) { return webhook.DecodeSecret(secret) }

// TestStatusEventsTwoNodes: a subscription made on node A reaches node B
// within its subscription cache's lifetime (5 s), and from then on every
// notification accepted by B and every delivery sent by either node's
// workers reaches the receiver exactly once, whichever node emitted it.
func TestStatusEventsTwoNodes(t *testing.T) {
	t.Parallel()
	cfg := eventsConfig(t)
	a, b := startTwoNodes(t, cfg)
	send := func(user string) string {
		t.Helper()
		code, resp := call(t, "POST", b.httpURL+"/v1/notifications", `{"user_id":"`+user+`","type":"order.shipped","channels":["email"],"data":{"order":"#1"}}`)
		var acc struct {
			NotificationID string `json:"notification_id"`
		}
		if err := json.Unmarshal(resp, &acc); code != 202 || err != nil {
			t.Fatalf("POST /v1/notifications to node B = %d %s", code, resp)
		}
		return acc.NotificationID
	}
	// Node B reads the (empty) subscription list before A has one.
	send("warm")
	h := newEventReceiver(t)
	subscribe(t, a.httpURL, h, `{"url":"URL","events":["notification.accepted","delivery.sent"]}`)
	made := time.Now()
	for i := 0; ; i++ {
		id := send("probe-" + strconv.Itoa(i))
		if _, _, ok := h.find("notification.accepted", "notification_id", id); ok {
			break
		}
		// The cache's 5 s, then a webhook delivery through the queue: a
		// loaded CI machine takes far longer than a quiet one.
		if time.Since(made) > 60*time.Second {
			t.Fatalf("node B emitted no event %s after the subscription was made on node A", time.Since(made))
		}
		time.Sleep(100 * time.Millisecond)
	}
	var ids []string
	for i := range 20 {
		ids = append(ids, send("u"+strconv.Itoa(i)))
	}
	for _, typ := range []string{"notification.accepted", "delivery.sent"} {
		for _, id := range ids {
			enginetest.EventuallyNil(t, 60*time.Second, typ+" of "+id, func() error {
				_, hits, ok := h.find(typ, "notification_id", id)
				return enginetest.State(ok && hits == 1, "found %v, %d requests", ok, hits)
			})
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, n := range h.hits {
		if n != 1 {
			t.Errorf("event %s reached the receiver %d times, want once", id, n)
		}
	}
	if h.bad != 0 {
		t.Errorf("%d requests failed signature verification", h.bad)
	}
}
