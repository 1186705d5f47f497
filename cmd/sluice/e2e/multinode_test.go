package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify/webhook"
)

// cluster is three `sluice serve` processes sharing one private
// PostgreSQL, Redis and NATS, as a scale-out deployment runs them.
type cluster struct {
	nodes              []*child
	pg, redis, natsSrv *enginetest.Process
}

// startCluster starts the engines, then three nodes at once (they race
// for the migrations, as a rolling deploy would). Policies refresh only
// hourly, so a change reaching another node within a second can only have
// travelled by the push path.
func startCluster(t *testing.T, extra ...string) *cluster {
	t.Helper()
	redis := enginetest.StartRedis(t)
	c := startNodes(t, 3, redis.URL(), extra...)
	c.redis = redis
	return c
}

// startNodes starts a private PostgreSQL and NATS, then n nodes at once on
// them and the Redis at redisURL (a server or a Cluster).
func startNodes(t *testing.T, n int, redisURL string, extra ...string) *cluster {
	t.Helper()
	c := &cluster{pg: enginetest.StartPostgres(t), natsSrv: enginetest.StartNATS(t)}
	flags := append([]string{"--database-url", c.pg.URL(), "--redis-url", redisURL, "--nats-url", c.natsSrv.URL(),
		"--ratelimit-nodes", strconv.Itoa(n), "--ratelimit-refresh", "1h"}, extra...)
	c.nodes = make([]*child, n)
	var wg sync.WaitGroup
	bin := sluiceBinary(t)
	errs := make([]error, n)
	for i := range c.nodes {
		dir := t.TempDir()
		wg.Go(func() { c.nodes[i], errs[i] = tryStartChild(t, bin, dir, flags...) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// Stop the nodes first: their logs are complete (and no longer
		// written) once exited has reported.
		for i, n := range c.nodes {
			_ = n.cmd.Process.Kill()
			<-n.exited
			t.Logf("node %d warnings and errors:\n%s", i, warnings(n.logs.String(), 40))
		}
	})
	return c
}

// warnings returns the last n WARN and ERROR lines of a JSON log.
func warnings(log string, n int) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out[max(0, len(out)-n):], "\n")
}

// call sends one JSON request to node i and decodes the answer.
func (c *cluster) call(t *testing.T, i int, method, path, body string) (int, map[string]any) {
	t.Helper()
	code, out, err := c.try(i, method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, out
}

// try is call returning its error, for any goroutine.
func (c *cluster) try(i int, method, path, body string) (int, map[string]any, error) {
	code, raw, err := c.nodes[i].try(method, path, "", body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return code, out, err
}

// propagation polls every node but from until cond holds on each, and
// returns how long the slowest took after start (poll every 5 ms; a
// failing poll is not an error). It fails the test past a deadline.
func (c *cluster) propagation(t *testing.T, from int, start time.Time, what string, cond func(code int, body map[string]any) bool, method, path string) time.Duration {
	t.Helper()
	var (
		mu      sync.Mutex
		slowest time.Duration
		wg      sync.WaitGroup
	)
	for i, n := range c.nodes {
		if i == from {
			continue
		}
		wg.Go(func() {
			deadline := start.Add(10 * time.Second)
			for time.Now().Before(deadline) {
				req, _ := http.NewRequest(method, n.httpURL+path, nil)
				resp, err := apiClient.Do(req)
				if err == nil {
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					var body map[string]any
					_ = json.Unmarshal(raw, &body)
					if cond(resp.StatusCode, body) {
						mu.Lock()
						slowest = max(slowest, time.Since(start))
						mu.Unlock()
						return
					}
				}
				time.Sleep(5 * time.Millisecond) // polling interval
			}
			t.Errorf("%s: node %d did not see it within 10s", what, i)
		})
	}
	wg.Wait()
	return slowest
}

// TestThreeNodes: a limit is shared by three nodes, not tripled; policy
// changes and blocks made on one node are enforced by the other two within
// one second, carried by NATS (the periodic refresh is an hour away); and
// notifications posted to all three are delivered once per channel.
func TestThreeNodes(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	secret := webhook.NewSecret()
	hook := enginetest.StartWebhookReceiver(t, http.StatusOK)
	key, _ := webhook.DecodeSecret(secret)
	hook.Verify(key)
	c := startCluster(t, "--allow-private-targets", "--webhook-secret", secret)
	t.Run("notifications", func(t *testing.T) { threeNodeNotifications(t, c, hook) })

	// A policy created on node 0 reaches nodes 1 and 2.
	start := time.Now()
	if code, body := c.call(t, 0, "PUT", "/v1/ratelimit/policies/sixty",
		`{"algorithm":"sliding_window_log","limit":60,"period":"1m"}`); code != 201 {
		t.Fatalf("PUT policy = %d %v", code, body)
	}
	created := c.propagation(t, 0, start, "policy created on node 0", func(code int, body map[string]any) bool {
		return code == 200 && body["limit"] == 60.0
	}, "GET", "/v1/ratelimit/keys/sixty/probe")

	// 180 checks at once, 60 through each node, on one key under a
	// 60-per-minute policy: 60 are admitted in total, not 180. The sliding
	// log is exact, so the count does not depend on how long this takes.
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 180 {
		wg.Go(func() {
			code, body, err := c.try(i%3, "POST", "/v1/ratelimit/check", `{"policy":"sixty","key":"k60"}`)
			if err != nil || code != 200 {
				t.Errorf("check = %d %v %v", code, body, err)
			}
			if body["allowed"] == true {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 60 {
		t.Errorf("180 checks over 3 nodes on a 60-per-minute key admitted %d, want 60", allowed.Load())
	}

	// A change made on node 1 reaches nodes 0 and 2.
	start = time.Now()
	if code, body := c.call(t, 1, "PUT", "/v1/ratelimit/policies/sixty",
		`{"algorithm":"sliding_window_log","limit":5,"period":"1m"}`); code != 200 {
		t.Fatalf("PUT changed policy = %d %v", code, body)
	}
	changed := c.propagation(t, 1, start, "policy changed on node 1", func(code int, body map[string]any) bool {
		return code == 200 && body["limit"] == 5.0
	}, "GET", "/v1/ratelimit/keys/sixty/probe")

	// A block made on node 2 reaches nodes 0 and 1.
	start = time.Now()
	if code, body := c.call(t, 2, "POST", "/v1/ratelimit/blocks", `{"key":"mallory","duration":"10m","reason":"chaos"}`); code != 201 {
		t.Fatalf("POST block = %d %v", code, body)
	}
	blocked := c.propagation(t, 2, start, "block made on node 2", func(code int, body map[string]any) bool {
		return code == 200 && body["blocked"] == true
	}, "GET", "/v1/ratelimit/keys/free/mallory")
	for i := range c.nodes {
		if code, body := c.call(t, i, "POST", "/v1/ratelimit/check", `{"policy":"free","key":"mallory"}`); code != 200 || body["allowed"] != false {
			t.Errorf("check of a blocked key on node %d = %d %v, want refused", i, code, body)
		}
	}

	for what, took := range map[string]time.Duration{"policy created": created, "policy changed": changed, "block": blocked} {
		if took > time.Second {
			t.Errorf("%s reached every node after %v, want within 1s", what, took)
		}
	}
	t.Logf("three nodes: %d of 180 checks admitted on a 60/min key; every node saw: policy created %v, changed %v, block %v",
		allowed.Load(), created.Round(time.Millisecond), changed.Round(time.Millisecond), blocked.Round(time.Millisecond))
}

// threeNodeNotifications posts notifications round robin to the three
// nodes (the workers of all three consume the same queues) and counts what
// the receivers got: every webhook once, every email once in the outbox.
func threeNodeNotifications(t *testing.T, c *cluster, hook *enginetest.WebhookReceiver) {
	const users, total = 10, 150
	hook.RouteUsers(t, c.nodes[0].httpURL, users)
	var ids []string
	for i := range total {
		code, body := c.call(t, i%3, "POST", "/v1/notifications",
			fmt.Sprintf(`{"request_id":"three-%d","user_id":"u%d","type":"order.shipped","data":{"order":"%d"}}`, i, i%users, i))
		if code != 202 {
			t.Fatalf("POST notification to node %d = %d %v", i%3, code, body)
		}
		ids = append(ids, body["notification_id"].(string))
	}
	start := time.Now()
	dups := hook.AllReceived(t, ids, 60*time.Second)
	received := time.Since(start)
	emails := map[string]int{}
	enginetest.EventuallyNil(t, 30*time.Second, "every email in the outbox", func() error {
		clear(emails)
		for u := range users {
			code, raw := c.nodes[u%3].request(t, "GET", fmt.Sprintf("/v1/outbox?user_id=u%d&limit=200", u), "", "")
			var page struct {
				Items []struct {
					NotificationID string `json:"notification_id"`
					Channel        string `json:"channel"`
				}
			}
			if code != 200 || json.Unmarshal(raw, &page) != nil {
				return enginetest.State(false, "%s", fmt.Sprint("outbox ", code, string(raw)))
			}
			for _, it := range page.Items {
				emails[it.NotificationID+":"+it.Channel]++
			}
		}
		return enginetest.State(len(emails) == total, "%d of %d emails", len(emails), total)
	})
	dupEmails := 0
	for _, n := range emails {
		dupEmails += n - 1
	}
	if dups != 0 || dupEmails != 0 {
		t.Errorf("three nodes delivered %d duplicate webhooks and %d duplicate emails, want none", dups, dupEmails)
	}
	t.Logf("three nodes: %d notifications posted round robin; every webhook and email delivered once (duplicates: %d webhook, %d email) within %v",
		total, dups, dupEmails, received.Round(time.Millisecond))
}
