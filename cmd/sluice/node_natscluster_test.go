package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// natsNodes starts two in-process nodes sharing a PostgreSQL schema and the
// NATS servers at natsURL, with webhook deliveries to private addresses
// allowed, and returns their base URLs.
func natsNodes(t *testing.T, natsURL string, replicas int) []string {
	t.Helper()
	db := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	prefix := fmt.Sprintf("N%d_", time.Now().UnixNano()%1e9)
	var urls []string
	for range 2 {
		cfg := testConfig(t)
		cfg.DatabaseURL, cfg.NATSURL, cfg.NATSReplicas, cfg.NATSPrefix = db, natsURL, replicas, prefix
		cfg.AllowPrivate = true
		cfg.Notify.RecoveryAfter = 5 * time.Second
		urls = append(urls, startNode(t, cfg).httpURL)
	}
	return urls
}

// accept posts a notification and returns its id; it fails the test unless
// the answer is 202.
func accept(t *testing.T, base, body string) string {
	t.Helper()
	id, err := tryAccept(base, body)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// tryAccept is accept returning its error, for any goroutine.
func tryAccept(base, body string) (string, error) {
	code, resp, err := tryCall("POST", base+"/v1/notifications", body)
	if err != nil {
		return "", err
	}
	if code != http.StatusAccepted {
		return "", fmt.Errorf("POST /v1/notifications = %d %s", code, resp)
	}
	var a struct {
		ID string `json:"notification_id"`
	}
	if err := json.Unmarshal(resp, &a); err != nil {
		return "", fmt.Errorf("POST /v1/notifications: %w", err)
	}
	return a.ID, nil
}

// TestOrderAcrossNodesHTTP: 200 notifications for 5 users, accepted
// alternately by two nodes (each request waiting for its 202), reach one
// webhook receiver in each user's acceptance order, on a current NATS
// server where the queue pins each partition to one node.
func TestOrderAcrossNodesHTTP(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	nats := enginetest.StartNATSCluster(t, 1)
	nodes := natsNodes(t, nats.URL(), 1)
	hook := enginetest.StartWebhookReceiver(t, http.StatusOK)
	const users, total = 5, 200
	for u := range users {
		if code, resp := call(t, "PUT", fmt.Sprintf("%s/v1/users/o%d/settings", nodes[0], u),
			`{"contacts":{"webhook_url":"`+hook.URL+`/hook"}}`); code != 200 {
			t.Fatalf("PUT settings = %d %s", code, resp)
		}
	}
	want := map[string][]string{} // user -> webhook-ids in acceptance order
	user := map[string]string{}   // webhook-id -> user
	for i := range total {
		u := fmt.Sprintf("o%d", i%users)
		id := accept(t, nodes[i%2], `{"user_id":"`+u+`","type":"order.shipped","channels":["webhook"],"data":{"order":"#`+fmt.Sprint(i)+`"}}`)
		want[u] = append(want[u], id+":webhook")
		user[id+":webhook"] = u
	}
	enginetest.EventuallyNil(t, 60*time.Second, "every notification at the receiver", func() error {
		unique, _ := hook.Counts()
		return enginetest.State(unique == total, "%d of %d", unique, total)
	})
	got := map[string][]string{}
	for _, id := range hook.Order() {
		got[user[id]] = append(got[user[id]], id)
	}
	for u, ids := range want {
		if !slices.Equal(got[u], ids) {
			t.Errorf("user %s: arrivals %v,\nwant acceptance order %v", u, got[u], ids)
		}
	}
}

// TestCampaignSurvivesNATSServerLoss: two nodes on a three-server
// JetStream cluster with R3 streams; one NATS server is shut down in the
// middle of a campaign and started again. Every accepted notification
// still reaches a terminal status, duplicates at the receiver stay within
// what was in flight, and OTPs sent during the loss keep their latency
// (reported, see docs/benchmarks.md).
func TestCampaignSurvivesNATSServerLoss(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	cluster := enginetest.StartNATSCluster(t, 3)
	nodes := natsNodes(t, cluster.URL(), 3)
	hook := enginetest.StartWebhookReceiver(t, http.StatusOK)
	const users = 20
	for u := range users {
		if code, resp := call(t, "PUT", fmt.Sprintf("%s/v1/users/c%d/settings", nodes[0], u),
			`{"contacts":{"webhook_url":"`+hook.URL+`/hook"}}`); code != 200 {
			t.Fatalf("PUT settings = %d %s", code, resp)
		}
	}
	campaign := 200
	if testing.Short() {
		campaign = 60
	}
	var (
		mu       sync.Mutex
		accepted []string
		otpSent  = map[string]time.Time{} // OTPs sent while the server was down
	)
	var wg sync.WaitGroup
	for w := range 4 { // four clients, as a bulk sender would run
		wg.Go(func() {
			for i := w; i < campaign; i += 4 {
				id, err := tryAccept(nodes[i%2], fmt.Sprintf(`{"user_id":"c%d","type":"order.shipped","channels":["webhook"]}`, i%users))
				if err != nil {
					t.Errorf("campaign item %d: %v", i, err)
					continue
				}
				mu.Lock()
				accepted = append(accepted, id)
				mu.Unlock()
			}
		})
	}
	// Lose one server once the campaign is under way, and send OTPs while
	// it is down.
	enginetest.EventuallyNil(t, 60*time.Second, "campaign under way", func() error {
		unique, _ := hook.Counts()
		return enginetest.State(unique >= campaign/4, "%s", fmt.Sprint(unique))
	})
	lost := time.Now()
	cluster.Kill(0)
	for i := range 20 {
		sent := time.Now()
		id := accept(t, nodes[i%2], fmt.Sprintf(`{"user_id":"c%d","type":"otp","channels":["webhook"],"data":{"code":"%06d"}}`, i%users, i))
		mu.Lock()
		accepted = append(accepted, id)
		otpSent[id+":webhook"] = sent
		mu.Unlock()
	}
	wg.Wait()
	cluster.Restart(0)
	t.Logf("server 0 down for %s", time.Since(lost).Round(time.Millisecond))

	// Every accepted notification ends in a terminal status.
	pending := slices.Clone(accepted)
	enginetest.EventuallyNil(t, 2*time.Minute, "every accepted notification in a terminal status", func() error {
		var still []string
		for _, id := range pending {
			if !terminal(t, nodes[0], id) {
				still = append(still, id)
			}
		}
		pending = still
		return enginetest.State(len(pending) == 0, "%d of %d not yet: %v", len(pending), len(accepted), pending[:min(3, len(pending))])
	})
	unique, total := hook.Counts()
	if unique != len(accepted) {
		t.Errorf("receiver saw %d distinct notifications, want %d", unique, len(accepted))
	}
	dups := total - unique
	// What can run twice is what was in flight when the server went away:
	// at most the jobs the two nodes held, far fewer than the campaign.
	if dups > len(accepted)/4 {
		t.Errorf("%d duplicate deliveries of %d, more than a quarter", dups, len(accepted))
	}
	t.Logf("campaign %d + 20 OTPs through two nodes on a 3-server R3 cluster, one server lost: %d duplicate deliveries", campaign, dups)

	var lat []time.Duration
	for id, sent := range otpSent {
		at, _ := hook.FirstAt(id)
		lat = append(lat, at.Sub(sent))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p99 := lat[min(len(lat)-1, len(lat)*99/100)]
	t.Logf("OTP latency during the server loss: p50 %s, p99 %s, max %s",
		lat[len(lat)/2].Round(time.Millisecond), p99.Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}

// terminal reports whether every delivery of notification id is in a
// terminal status.
func terminal(t *testing.T, base, id string) bool {
	t.Helper()
	code, body := get(t, base+"/v1/notifications/"+id)
	if code != 200 {
		return false
	}
	var n struct {
		Deliveries []struct{ Status string } `json:"deliveries"`
	}
	if err := json.Unmarshal(body, &n); err != nil {
		t.Fatal(err)
	}
	for _, d := range n.Deliveries {
		switch d.Status {
		case "sent", "delivered", "failed", "dead", "expired", "suppressed", "canceled":
		default:
			return false
		}
	}
	return len(n.Deliveries) > 0
}
