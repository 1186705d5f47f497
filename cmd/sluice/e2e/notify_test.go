package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify/webhook"
)

// TestKillNineNotifications kills a `sluice serve` with SIGKILL while 2,000
// notifications are being posted and delivered, restarts it on the same
// data dir and checks that every notification that got a 202 reaches a
// terminal status and its webhook, and that duplicates at the receiver are
// bounded by what was in flight at the crash.
func TestKillNineNotifications(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	const (
		total   = 2000
		killAt  = 1000
		users   = 50
		workers = 16 // orders jobs in flight per channel: the duplicate bound
	)
	secret := webhook.NewSecret()
	key, _ := webhook.DecodeSecret(secret)
	hook := enginetest.StartWebhookReceiver(t, http.StatusOK)
	hook.Verify(key)
	dataDir := t.TempDir()
	flags := []string{"--allow-private-targets", "--webhook-secret", secret, "--notify-recovery-after", "2s",
		"--notify-ack-wait", "4s", "--webhook-timeout", "2s", "--notify-workers-orders", fmt.Sprint(workers)}
	c := startChild(t, dataDir, flags...)
	for u := range users {
		body := fmt.Sprintf(`{"channels":{"sms":false,"push":false,"webhook":true},"contacts":{"webhook_url":"%s/u%d"}}`, hook.URL, u)
		if code, resp := c.request(t, "PUT", fmt.Sprintf("/v1/users/u%d/settings", u), "", body); code != 200 {
			t.Fatalf("PUT settings = %d %s", code, resp)
		}
	}

	hc := &http.Client{Transport: apiTransport, Timeout: 10 * time.Second}
	var (
		mu       sync.Mutex
		accepted []string
		n202     atomic.Int64
		killOnce sync.Once
		wg       sync.WaitGroup
	)
	next := make(chan int, total) // every item: no send waits on a worker
	for range 32 {
		wg.Go(func() {
			for i := range next {
				body := fmt.Sprintf(`{"request_id":"crash-%d","user_id":"u%d","type":"order.confirmed","data":{"order":"%d"}}`, i, i%users, i)
				resp, err := hc.Post(c.httpURL+"/v1/notifications", "application/json", strings.NewReader(body))
				if err != nil {
					continue // the server is gone: not acknowledged
				}
				var a struct {
					NotificationID string `json:"notification_id"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					continue
				}
				mu.Lock()
				accepted = append(accepted, a.NotificationID)
				mu.Unlock()
				if n202.Add(1) == killAt {
					killOnce.Do(func() { _ = c.cmd.Process.Signal(syscall.SIGKILL) })
				}
			}
		})
	}
	for i := range total {
		next <- i
	}
	close(next)
	wg.Wait()
	<-c.exited
	_, hitsBefore := hook.Counts()
	t.Logf("%d notifications acknowledged with 202 before the kill; %d webhook requests received", len(accepted), hitsBefore)
	if len(accepted) < killAt {
		t.Fatalf("only %d 202s before the kill, want at least %d", len(accepted), killAt)
	}

	c2 := startChild(t, dataDir, flags...)
	enginetest.EventuallyNil(t, 90*time.Second, "every acknowledged notification reaches its webhook", func() error {
		missing := 0
		for _, id := range accepted {
			if !hook.Seen(id + ":webhook") {
				missing++
			}
		}
		return enginetest.State(missing == 0, "%d of %d not yet received", missing, len(accepted))
	})
	pending := slices.Clone(accepted)
	enginetest.EventuallyNil(t, 60*time.Second, "every acknowledged notification settles", func() error {
		var still []string
		for _, id := range pending {
			code, body := c2.request(t, "GET", "/v1/notifications/"+id, "", "")
			var n notificationBody
			if code != 200 || json.Unmarshal(body, &n) != nil || !n.settled() {
				still = append(still, id)
				continue
			}
			for _, d := range n.Deliveries {
				if want := map[string]string{"email": "sent", "webhook": "sent", "sms": "suppressed", "push": "suppressed", "inapp": "sent"}[d.Channel]; d.Status != want {
					t.Errorf("%s %s = %s, want %s", id, d.Channel, d.Status, want)
				}
			}
		}
		pending = still
		return enginetest.State(len(still) == 0, "%d not settled, e.g. %v", len(still), still[:min(3, len(still))])
	})
	unique, requests := hook.Counts()
	dups := requests - unique
	t.Logf("receiver: %d notifications in %d requests: %d duplicates (bound: %d in flight at the crash); %d bad signatures",
		unique, requests, dups, workers, hook.BadSignatures())
	if dups > workers {
		t.Errorf("%d duplicate webhooks, more than the %d jobs that can be in flight", dups, workers)
	}
	if n := hook.BadSignatures(); n > 0 {
		t.Errorf("%d webhook requests failed signature verification", n)
	}
	// The outbox keys entries by attempt: a redelivered job adds nothing.
	perNotification := map[string]int{}
	cursor := ""
	for {
		code, body := c2.request(t, "GET", "/v1/outbox?limit=200&cursor="+cursor, "", "")
		var page struct {
			Items []struct {
				NotificationID string `json:"notification_id"`
			}
			NextCursor string `json:"next_cursor"`
		}
		if code != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("outbox = %d %s", code, body)
		}
		for _, it := range page.Items {
			perNotification[it.NotificationID]++
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	for _, id := range accepted {
		if perNotification[id] != 1 {
			t.Errorf("outbox holds %d emails of %s, want exactly 1", perNotification[id], id)
		}
	}
	_ = c2.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-c2.exited; err != nil {
		t.Errorf("after SIGTERM: %v, want exit 0", err)
	}
}

// notificationBody is GET /v1/notifications/{id}, as far as these tests
// read it.
type notificationBody struct {
	ID         string
	CreatedAt  time.Time `json:"created_at"`
	Deliveries []struct {
		Channel, Status string
	}
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
