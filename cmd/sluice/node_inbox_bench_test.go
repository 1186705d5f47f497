package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestInboxFanoutBenchmark measures the inbox's event streams (the
// "In-app inbox: SSE fan-out" figures of docs/benchmarks.md), in this
// process with the load generator. Skipped unless SLUICE_BENCH_INBOX=1.
//
// Fan-out: one node (SQLite, embedded NATS), BENCH_STREAMS streams
// (default 1,000) held by BENCH_STREAMS/10 users, ten each; batches of 100
// inapp notifications round-robin over the users for BENCH_SECONDS
// (default 10), then until every message reached its ten streams. It
// reports messages stored/s and events delivered to streams/s: the
// pipeline's rate times ten. The fan-out alone is BenchmarkInboxFanout
// (internal/httpapi).
//
// Cross-node latency: two nodes on one PostgreSQL schema and the shared
// NATS; a stream per user on node B, BENCH_SAMPLES (default 1,000)
// notifications POSTed one at a time to node A by 8 clients; for each, the
// time from the 202 to the event on B's stream (0 when the event came
// first), and from the POST's start.
func TestInboxFanoutBenchmark(t *testing.T) {
	if os.Getenv("SLUICE_BENCH_INBOX") == "" {
		t.Skip("set SLUICE_BENCH_INBOX=1 to measure (see docs/benchmarks.md)")
	}
	t.Run("fan-out on one node", inboxFanout)
	t.Run("202 to event across nodes", inboxCrossNode)
}

// benchStreams opens one stream per url and calls seen(i, id) for each
// message event of stream i (from the stream's goroutine).
func benchStreams(t *testing.T, urls []string, seen func(i int, id string)) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(urls)}, Timeout: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	var open sync.WaitGroup
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i, u := range urls {
		open.Add(1)
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
			resp, err := hc.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("stream %d: %v %v", i, err, resp)
				open.Done()
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			ready, isMessage := false, false
			for sc.Scan() {
				line := sc.Bytes()
				switch {
				case len(line) == 0:
					isMessage = false
				case string(line) == "event: unread" && !ready:
					ready = true
					open.Done() // subscribed and caught up
				case string(line) == "event: message":
					isMessage = true
				case isMessage && len(line) > 6 && string(line[:6]) == "data: ":
					// The id is the first field of the message object.
					d := string(line)
					if _, rest, ok := strings.Cut(d, `"id":"`); ok {
						id, _, _ := strings.Cut(rest, `"`)
						seen(i, id)
					}
				}
			}
		})
	}
	open.Wait()
}

func inboxFanout(t *testing.T) {
	streams, seconds := benchEnv("BENCH_STREAMS", 1000), benchEnv("BENCH_SECONDS", 10)
	users := max(1, streams/10)
	cfg := testConfig(t)
	cfg.Notify.Inbox.MaxStreams = streams + 10
	cfg.Notify.Inbox.MaxStreamsPerUser = 10
	n := startNode(t, cfg)
	urls := make([]string, streams)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/v1/users/fan%d/inbox/stream", n.httpURL, i%users)
	}
	var events atomic.Int64
	benchStreams(t, urls, func(int, string) { events.Add(1) })
	t.Logf("%d streams open for %d users", streams, users)

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: time.Minute}
	var sent atomic.Int64
	start := time.Now()
	stop := start.Add(time.Duration(seconds) * time.Second)
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for b := 0; time.Now().Before(stop); b++ {
				var sb strings.Builder
				sb.WriteString(`{"notifications":[`)
				for k := range 100 {
					if k > 0 {
						sb.WriteByte(',')
					}
					fmt.Fprintf(&sb, `{"user_id":"fan%d","type":"order.shipped","channels":["inapp"],"data":{"order":"#%d-%d-%d"}}`,
						(c*100+k+b*400)%users, c, b, k)
				}
				sb.WriteString(`]}`)
				resp, err := hc.Post(n.httpURL+"/v1/notifications/batch", "application/json", strings.NewReader(sb.String()))
				if err != nil || resp.StatusCode >= 300 {
					t.Errorf("batch: %v %v", err, resp)
					return
				}
				resp.Body.Close()
				sent.Add(100)
			}
		})
	}
	wg.Wait()
	accepted := time.Since(start)
	want := sent.Load() * int64(streams/users)
	enginetest.EventuallyNil(t, 5*time.Minute, "every message reaches its streams", func() error {
		return enginetest.State(events.Load() >= want, "%d of %d events", events.Load(), want)
	})
	total := time.Since(start)
	t.Logf("accepted %d inapp notifications in %v (%.0f/s); all %d stream events within %v: %.0f messages/s stored, %.0f events/s delivered to %d streams",
		sent.Load(), accepted.Round(time.Millisecond), float64(sent.Load())/accepted.Seconds(), want, total.Round(time.Millisecond),
		float64(sent.Load())/total.Seconds(), float64(want)/total.Seconds(), streams)
}

func inboxCrossNode(t *testing.T) {
	samples := benchEnv("BENCH_SAMPLES", 1000)
	cfg := testConfig(t)
	a, b := startTwoNodes(t, cfg)
	const users = 8
	var (
		mu      sync.Mutex
		arrived = map[string]time.Time{}
	)
	urls := make([]string, users)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/v1/users/x%d/inbox/stream", b.httpURL, i)
	}
	benchStreams(t, urls, func(_ int, id string) {
		now := time.Now()
		mu.Lock()
		arrived[id] = now
		mu.Unlock()
	})
	type sample struct {
		id            string
		start, answer time.Time
	}
	out := make([][]sample, users)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: users}, Timeout: time.Minute}
	var wg sync.WaitGroup
	for c := range users {
		wg.Go(func() {
			for k := range samples / users {
				body := fmt.Sprintf(`{"user_id":"x%d","type":"order.shipped","channels":["inapp"],"data":{"order":"#%d"}}`, c, k)
				st := time.Now()
				resp, err := hc.Post(a.httpURL+"/v1/notifications", "application/json", strings.NewReader(body))
				if err != nil || resp.StatusCode != 202 {
					t.Errorf("POST: %v %v", err, resp)
					return
				}
				var acc struct {
					ID string `json:"notification_id"`
				}
				raw := make([]byte, 512)
				nr, _ := resp.Body.Read(raw)
				resp.Body.Close()
				got := time.Now()
				if _, rest, ok := strings.Cut(string(raw[:nr]), `"notification_id":"`); ok {
					acc.ID, _, _ = strings.Cut(rest, `"`)
				}
				out[c] = append(out[c], sample{acc.ID, st, got})
			}
		})
	}
	wg.Wait()
	all := slices.Concat(out...)
	enginetest.EventuallyNil(t, time.Minute, "every event reaches node B", func() error {
		mu.Lock()
		defer mu.Unlock()
		return enginetest.State(len(arrived) >= len(all), "%d of %d", len(arrived), len(all))
	})
	var from202, fromPost []time.Duration
	for _, s := range all {
		at := arrived[s.id]
		from202 = append(from202, max(0, at.Sub(s.answer)))
		fromPost = append(fromPost, at.Sub(s.start))
	}
	q := func(ds []time.Duration, p float64) time.Duration {
		slices.Sort(ds)
		return ds[min(len(ds)-1, int(float64(len(ds))*p))].Round(10 * time.Microsecond)
	}
	t.Logf("%d notifications to node A, events on node B: 202 -> event p50 %v p99 %v max %v; POST start -> event p50 %v p99 %v",
		len(all), q(from202, 0.5), q(from202, 0.99), q(from202, 1), q(fromPost, 0.5), q(fromPost, 0.99))
}
