package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestNotifyNodesBenchmark measures what a second node adds (the two-node
// figures of docs/benchmarks.md): one node, then two, each on a fresh
// PostgreSQL schema and stream prefix of one 3-server NATS cluster with R3
// streams, in this process with the load generator (all share the
// machine's cores). For each: single POSTs from BENCH_CLIENTS clients
// (default 64) spread over the nodes for BENCH_SECONDS (default 10), the
// seeds' 1.75 deliveries each, until every delivery is sent; then a
// campaign to BENCH_CAMPAIGN users (default 20000; 0 skips it) in batches
// of 1,000, and the deliveries/s once it is accepted. Skipped unless
// SLUICE_BENCH_NODES=1.
func TestNotifyNodesBenchmark(t *testing.T) {
	if os.Getenv("SLUICE_BENCH_NODES") == "" {
		t.Skip("set SLUICE_BENCH_NODES=1 to measure (see docs/benchmarks.md)")
	}
	seconds, clients, campaign := benchEnv("BENCH_SECONDS", 10), benchEnv("BENCH_CLIENTS", 64), benchEnv("BENCH_CAMPAIGN", 20000)
	cluster := enginetest.StartNATSCluster(t, 3)
	pg := enginetest.PostgresURL(t)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 60 * time.Second}
	for _, nodes := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d nodes", nodes), func(t *testing.T) {
			db, prefix := enginetest.PostgresSchema(t, pg), natsPrefix(t, cluster.URL())
			var urls []string
			for range nodes {
				cfg := testConfig(t)
				cfg.ShutdownTimeout = 60 * time.Second
				cfg.DatabaseURL, cfg.NATSURL, cfg.NATSReplicas, cfg.NATSPrefix = db, cluster.URL(), 3, prefix
				cfg.Notify.MarketingCap = 0
				urls = append(urls, startNode(t, cfg).httpURL)
			}
			delivered := func(category string) int64 {
				var sum int64
				for _, u := range urls {
					sum += deliveredCount(t, hc, u, category)
				}
				return sum
			}
			waitAll := func(category string, want int64, within time.Duration) {
				t.Helper()
				deadline := time.Now().Add(within)
				for delivered(category) < want {
					if time.Now().After(deadline) {
						t.Fatalf("delivered %d of %d within %v", delivered(category), want, within)
					}
					time.Sleep(100 * time.Millisecond) // polling interval
				}
			}
			perNode := func(category string) []int64 {
				var out []int64
				for _, u := range urls {
					out = append(out, deliveredCount(t, hc, u, category))
				}
				return out
			}

			// Single POSTs, spread over the nodes as a load balancer would.
			var accepted, want atomic.Int64
			start := time.Now()
			deadline := start.Add(time.Duration(seconds) * time.Second)
			var wg sync.WaitGroup
			for c := range clients {
				wg.Go(func() {
					base := urls[c%len(urls)]
					for i := 0; time.Now().Before(deadline); i++ {
						channels, n := `["email","push"]`, int64(2)
						if i%4 == 3 {
							channels, n = `["email"]`, 1
						}
						body := fmt.Sprintf(`{"user_id":"u%d-%d","type":"order.confirmed","data":{"order":"%d","name":"Ann"},"channels":%s}`, c, i%100, i, channels)
						resp, err := hc.Post(base+"/v1/notifications", "application/json", strings.NewReader(body))
						if err != nil {
							t.Errorf("POST: %v", err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusAccepted {
							t.Errorf("POST: status %d", resp.StatusCode)
							return
						}
						accepted.Add(1)
						want.Add(n)
					}
				})
			}
			wg.Wait()
			acceptTime := time.Since(start)
			waitAll("", want.Load(), 5*time.Minute)
			drained := time.Since(start)
			t.Logf("%d node(s), single POSTs: %.0f accepted/s; %d deliveries by %.1fs: %.0f deliveries/s; by node %v",
				nodes, float64(accepted.Load())/acceptTime.Seconds(), want.Load(), drained.Seconds(),
				float64(want.Load())/drained.Seconds(), perNode(""))
			if campaign == 0 {
				return
			}

			// A campaign (email and push to each user) in batches.
			base := delivered("marketing")
			start = time.Now()
			batches := make(chan int, (campaign+999)/1000) // every batch: no send waits on a worker
			for w := range 4 {
				wg.Go(func() {
					for from := range batches {
						var b bytes.Buffer
						b.WriteString(`{"notifications":[`)
						for i := from; i < min(from+1000, campaign); i++ {
							if i > from {
								b.WriteByte(',')
							}
							fmt.Fprintf(&b, `{"request_id":"nodes-sale:m%d","user_id":"m%d","type":"flash_sale","data":{"discount":"30%%","name":"Ann"},"channels":["email","push"]}`, i, i)
						}
						b.WriteString(`]}`)
						resp, err := hc.Post(urls[w%len(urls)]+"/v1/notifications/batch", "application/json", &b)
						if err != nil {
							t.Errorf("batch: %v", err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
			for from := 0; from < campaign; from += 1000 {
				batches <- from
			}
			close(batches)
			wg.Wait()
			acceptedIn := time.Since(start)
			sentByAccepted := delivered("marketing") - base
			waitAll("marketing", base+2*int64(campaign), 10*time.Minute)
			drainedIn := time.Since(start)
			after := 2*int64(campaign) - sentByAccepted
			t.Logf("%d node(s), campaign of %d users: %.0f accepted/s; drained in %.1fs (%.0f deliveries/s, %.0f/s after the last batch); marketing by node %v",
				nodes, campaign, float64(campaign)/acceptedIn.Seconds(), drainedIn.Seconds(),
				float64(2*campaign)/drainedIn.Seconds(), float64(after)/(drainedIn-acceptedIn).Seconds(), perNode("marketing"))
		})
	}
}
