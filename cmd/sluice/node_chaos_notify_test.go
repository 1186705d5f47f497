package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify/webhook"
)

// notifyChaosConfig is a node whose webhooks go to loopback test servers,
// with short recovery and ack timings so a fault heals in seconds.
func notifyChaosConfig(t *testing.T, workers int) (config.Config, []byte) {
	t.Helper()
	cfg := testConfig(t)
	cfg.AllowPrivate = true
	cfg.Notify.Webhook.Secret = webhook.NewSecret()
	cfg.Notify.Webhook.Timeout = 2 * time.Second
	cfg.Notify.RecoveryAfter = 2 * time.Second
	cfg.Notify.AckWait = 4 * time.Second
	cfg.Notify.WorkersOrders = workers
	cfg.Notify.Retry.Orders.Base = 50 * time.Millisecond
	cfg.Notify.Retry.Orders.Cap = 500 * time.Millisecond
	cfg.Notify.Retry.Orders.Attempts = 20
	key, err := webhook.DecodeSecret(cfg.Notify.Webhook.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, key
}

// webhookUsers gives users u0..u(n-1) a webhook at hook (email stays on,
// to the outbox; sms and push off).
func webhookUsers(t *testing.T, base string, hook *hookServer, n int) {
	t.Helper()
	for u := range n {
		body := fmt.Sprintf(`{"channels":{"sms":false,"push":false,"webhook":true},"contacts":{"webhook_url":"%s/u%d"}}`, hook.URL, u)
		if code, resp := call(t, "PUT", fmt.Sprintf("%s/v1/users/u%d/settings", base, u), body); code != 200 {
			t.Fatalf("PUT settings = %d %s", code, resp)
		}
	}
}

// postNotifications posts n order notifications from 16 callers and
// returns the ids that got a 202; during runs while they are posted.
func postNotifications(t *testing.T, base, prefix string, n, users int, during func()) []string {
	t.Helper()
	var (
		mu  sync.Mutex
		ids []string
		wg  sync.WaitGroup
	)
	next := make(chan int)
	hc := &http.Client{Transport: apiTransport, Timeout: 10 * time.Second}
	for range 16 {
		wg.Go(func() {
			for i := range next {
				body := fmt.Sprintf(`{"request_id":"%s-%d","user_id":"u%d","type":"order.confirmed","data":{"order":"%d"}}`, prefix, i, i%users, i)
				resp, err := hc.Post(base+"/v1/notifications", "application/json", strings.NewReader(body))
				if err != nil {
					continue
				}
				var a struct {
					NotificationID string `json:"notification_id"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					mu.Lock()
					ids = append(ids, a.NotificationID)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		if i == n/2 && during != nil {
			during()
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return ids
}

// allReceived waits until hook has seen every id's webhook and returns the
// duplicates it counted (requests beyond one per id).
func allReceived(t *testing.T, hook *hookServer, ids []string, within time.Duration) int {
	t.Helper()
	eventually(t, within, "every acknowledged notification reaches its webhook", func() (bool, string) {
		missing := 0
		for _, id := range ids {
			if !hook.seen(id + ":webhook") {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d not yet received", missing, len(ids))
	})
	unique, total := hook.counts()
	return total - unique
}

// TestChaosNATSRestartDuringDelivery stops the node's NATS halfway through
// a burst of notifications and starts it again: every notification that got
// a 202 reaches its webhook, and duplicates at the receiver are counted and
// bounded by the jobs in flight when NATS went away.
func TestChaosNATSRestartDuringDelivery(t *testing.T) {
	t.Parallel()
	const workers, users, total = 8, 20, 400
	natsSrv := enginetest.StartNATS(t)
	cfg, key := notifyChaosConfig(t, workers)
	cfg.NATSURL = natsSrv.URL()
	n := startNode(t, cfg)
	hook := newHookServer(t, http.StatusOK)
	hook.verify = key
	webhookUsers(t, n.httpURL, hook, users)

	var stopped time.Time
	ids := postNotifications(t, n.httpURL, "nats", total, users, func() {
		stopped = time.Now()
		natsSrv.Stop()
	})
	down := time.Since(stopped)
	natsSrv.Start()
	restarted := time.Now()
	if len(ids) < total/2 {
		t.Fatalf("only %d of %d notifications acknowledged, want at least the half posted before the stop", len(ids), total)
	}
	dups := allReceived(t, hook, ids, 60*time.Second)
	// A job sent but not acknowledged when NATS went away is sent again:
	// at most one per worker of each channel in flight.
	if dups > workers {
		t.Errorf("%d duplicate webhooks across the NATS restart, want at most %d (the orders workers in flight)", dups, workers)
	}
	if bad := hook.badSignatures(); bad != 0 {
		t.Errorf("%d webhooks with a bad signature", bad)
	}
	t.Logf("nats restart during delivery: %d of %d acknowledged, all received %v after the restart (NATS down %v); %d duplicates (bound %d)",
		len(ids), total, time.Since(restarted).Round(time.Millisecond), down.Round(time.Millisecond), dups, workers)
}

// TestChaosProviderOutage makes the webhook receiver answer 503 for a
// while, then recover: its host's breaker opens after a few refusals, so
// the deliveries wait without hammering it or spending attempts (no dead
// letters), and after recovery the breaker's probe lets every notification
// through.
func TestChaosProviderOutage(t *testing.T) {
	t.Parallel()
	const users, total = 10, 100
	cfg, key := notifyChaosConfig(t, 4)
	cfg.Notify.Providers.BreakerOpenFor = time.Second
	n := startNode(t, cfg)
	hook := newHookServer(t, http.StatusServiceUnavailable)
	hook.verify = key
	webhookUsers(t, n.httpURL, hook, users)

	ids := postNotifications(t, n.httpURL, "outage", total, users, nil)
	if len(ids) != total {
		t.Fatalf("%d of %d notifications acknowledged, want all", len(ids), total)
	}
	eventually(t, 20*time.Second, "the outage to be retried past the breaker's probes", func() (bool, string) {
		_, hits := hook.counts()
		return hits >= 2*cfg.Notify.Providers.BreakerFailures, fmt.Sprintf("%d webhook requests", hits)
	})
	recovered := time.Now()
	hook.setStatus(http.StatusOK)
	_, failedCalls := hook.counts()
	// The receiver saw every id already (refused); the records say which
	// deliveries went through.
	eventually(t, 30*time.Second, "every webhook delivery sent after the recovery", func() (bool, string) {
		for _, id := range ids {
			nb := getNotification(t, n.httpURL, id)
			for _, d := range nb.Deliveries {
				if d.Channel == "webhook" && d.Status != "sent" {
					return false, fmt.Sprintf("%s webhook %s after %d attempts (%s, updated %v)", id, d.Status, d.Attempts, d.Error, time.Since(d.UpdatedAt))
				}
			}
		}
		return true, ""
	})
	took := time.Since(recovered)
	_, body := call(t, "GET", n.httpURL+"/v1/dead-letters", "")
	var dl struct{ Items []json.RawMessage }
	_ = json.Unmarshal(body, &dl)
	if len(dl.Items) != 0 {
		t.Errorf("%d dead letters after a recovered outage, want none: %s", len(dl.Items), body)
	}
	if failedCalls >= total {
		t.Errorf("%d refused calls for %d notifications: the receiver's breaker should have stopped most of them", failedCalls, total)
	}
	t.Logf("provider outage: %d notifications, %d refused webhook calls during the outage; all delivered %v after recovery, 0 dead letters",
		total, failedCalls, took.Round(time.Millisecond))
}
