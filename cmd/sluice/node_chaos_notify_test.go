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
		select { // the workers never stop early; the deadline is for a hung one
		case next <- i:
		case <-time.After(time.Minute):
			close(next)
			t.Fatalf("no worker took notification %d within a minute", i)
		}
	}
	close(next)
	wg.Wait()
	return ids
}

// TestChaosNATSRestartDuringDelivery stops the node's NATS halfway through
// a burst of notifications and starts it again: every notification that got
// a 202 reaches its webhook, and duplicates at the receiver are counted and
// bounded by the jobs in flight when NATS went away.
func TestChaosNATSRestartDuringDelivery(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	const workers, users, total = 8, 20, 400
	natsSrv := enginetest.StartNATS(t)
	cfg, key := notifyChaosConfig(t, workers)
	cfg.NATSURL = natsSrv.URL()
	n := startNode(t, cfg)
	hook := enginetest.StartWebhookReceiver(t, http.StatusOK)
	hook.Verify(key)
	hook.RouteUsers(t, n.httpURL, users)

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
	dups := hook.AllReceived(t, ids, 60*time.Second)
	// A job sent but not acknowledged when NATS went away is sent again:
	// at most one per worker of each channel in flight.
	if dups > workers {
		t.Errorf("%d duplicate webhooks across the NATS restart, want at most %d (the orders workers in flight)", dups, workers)
	}
	if bad := hook.BadSignatures(); bad != 0 {
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
	enginetest.Faults(t)
	t.Parallel()
	const users, total = 10, 100
	cfg, key := notifyChaosConfig(t, 4)
	cfg.Notify.Providers.BreakerOpenFor = time.Second
	n := startNode(t, cfg)
	hook := enginetest.StartWebhookReceiver(t, http.StatusServiceUnavailable)
	hook.Verify(key)
	hook.RouteUsers(t, n.httpURL, users)

	ids := postNotifications(t, n.httpURL, "outage", total, users, nil)
	if len(ids) != total {
		t.Fatalf("%d of %d notifications acknowledged, want all", len(ids), total)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "the outage to be retried past the breaker's probes", func() error {
		_, hits := hook.Counts()
		return enginetest.State(hits >= 2*cfg.Notify.Providers.BreakerFailures, "%d webhook requests", hits)
	})
	recovered := time.Now()
	hook.SetStatus(http.StatusOK)
	_, failedCalls := hook.Counts()
	// The receiver saw every id already (refused); the records say which
	// deliveries went through.
	enginetest.EventuallyNil(t, 30*time.Second, "every webhook delivery sent after the recovery", func() error {
		for _, id := range ids {
			nb := getNotification(t, n.httpURL, id)
			for _, d := range nb.Deliveries {
				if d.Channel == "webhook" && d.Status != "sent" {
					return enginetest.State(false, "%s webhook %s after %d attempts (%s, updated %v)", id, d.Status, d.Attempts, d.Error, time.Since(d.UpdatedAt))
				}
			}
		}
		return enginetest.State(true, "%s", "")
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
