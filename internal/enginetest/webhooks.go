package enginetest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify/webhook"
)

// WebhookReceiver is a webhook endpoint for tests of notification
// delivery: it answers every request with the status the test sets and
// records each webhook-id it receives, how often and when first, in
// arrival order. With Verify it also checks each request's signature.
type WebhookReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	status  int
	hits    map[string]int       // webhook-id -> requests
	order   []string             // webhook-ids in arrival order
	firstAt map[string]time.Time // webhook-id -> first arrival
	verify  []byte               // if set, the signing key to check requests against
	bad     int                  // requests that failed verification
}

// StartWebhookReceiver starts a receiver answering status until the test
// ends.
func StartWebhookReceiver(t testing.TB, status int) *WebhookReceiver {
	h := &WebhookReceiver{status: status, hits: map[string]int{}, firstAt: map[string]time.Time{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		ts, _ := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
		h.mu.Lock()
		if h.verify != nil && !webhook.Verify(h.verify, id, ts, body, r.Header.Get("webhook-signature")) {
			h.bad++
		}
		h.hits[id]++
		h.order = append(h.order, id)
		if _, ok := h.firstAt[id]; !ok {
			h.firstAt[id] = time.Now()
		}
		status := h.status
		h.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(h.Close)
	return h
}

// Verify makes the receiver check every later request's signature against
// key; BadSignatures counts those that fail.
func (h *WebhookReceiver) Verify(key []byte) { h.mu.Lock(); h.verify = key; h.mu.Unlock() }

// SetStatus sets the status later requests are answered with.
func (h *WebhookReceiver) SetStatus(s int) { h.mu.Lock(); h.status = s; h.mu.Unlock() }

// Seen reports whether a request with webhook-id id arrived.
func (h *WebhookReceiver) Seen(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hits[id] > 0
}

// BadSignatures is how many requests failed verification.
func (h *WebhookReceiver) BadSignatures() int { h.mu.Lock(); defer h.mu.Unlock(); return h.bad }

// Counts returns how many distinct webhook-ids arrived and in how many
// requests: total - unique are duplicates.
func (h *WebhookReceiver) Counts() (unique, total int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range h.hits {
		unique++
		total += n
	}
	return unique, total
}

// Order returns the webhook-ids of every request in arrival order.
func (h *WebhookReceiver) Order() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.order...)
}

// FirstAt returns when a request with webhook-id id first arrived.
func (h *WebhookReceiver) FirstAt(id string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	at, ok := h.firstAt[id]
	return at, ok
}

// RouteUsers points the webhook channel of users u0 to u{n-1} of the node
// at base to this receiver (path /u{i}), with SMS and push off.
func (h *WebhookReceiver) RouteUsers(t testing.TB, base string, n int) {
	t.Helper()
	c := &http.Client{Timeout: time.Minute}
	for u := range n {
		body := fmt.Sprintf(`{"channels":{"sms":false,"push":false,"webhook":true},"contacts":{"webhook_url":"%s/u%d"}}`, h.URL, u)
		req, err := http.NewRequest("PUT", fmt.Sprintf("%s/v1/users/u%d/settings", base, u), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("PUT settings of u%d: %v", u, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT settings of u%d = %d", u, resp.StatusCode)
		}
	}
}

// AllReceived waits until the receiver has seen the webhook of every
// notification id (webhook-id "<id>:webhook") and returns the duplicates
// it counted (requests beyond one per webhook-id). Call it only on the
// test's goroutine.
func (h *WebhookReceiver) AllReceived(t testing.TB, ids []string, within time.Duration) int {
	t.Helper()
	EventuallyNil(t, within, "every acknowledged notification reaches its webhook", func() error {
		missing := 0
		for _, id := range ids {
			if !h.Seen(id + ":webhook") {
				missing++
			}
		}
		return State(missing == 0, "%d of %d not yet received", missing, len(ids))
	})
	unique, total := h.Counts()
	return total - unique
}
