package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestNotifyBenchmark measures the figures of docs/benchmarks.md: accepted
// notifications/s over HTTP, deliveries/s, and the accept-to-delivery
// latency of OTPs while a marketing campaign drains. It runs a node in this
// process with its load generator (both share the machine), and is skipped
// unless SLUICE_NOTIFY_BENCH=1. Knobs: BENCH_ENGINES=external (Postgres +
// external NATS from the SLUICE_TEST_* variables), BENCH_GROUP_COMMIT=0,
// BENCH_SECONDS (accept phase, default 10), BENCH_CLIENTS (default 64),
// BENCH_CAMPAIGN (users, default 100000; 0 skips the campaign), BENCH_MIX=1
// (1.75 deliveries per notification, as in docs/benchmarks.md), BENCH_GOROUTINES=file (a
// goroutine profile halfway through the accept phase).
func TestNotifyBenchmark(t *testing.T) {
	if os.Getenv("SLUICE_NOTIFY_BENCH") == "" {
		t.Skip("set SLUICE_NOTIFY_BENCH=1 to measure (see docs/benchmarks.md)")
	}
	cfg := testConfig(t)
	cfg.ShutdownTimeout = 60 * time.Second
	engines := "embedded (SQLite + JetStream in process)"
	if os.Getenv("BENCH_ENGINES") == "external" {
		cfg.DatabaseURL = enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
		cfg.NATSURL = enginetest.NATSURL(t)
		cfg.NATSPrefix = natsPrefix(t, cfg.NATSURL)
		engines = "PostgreSQL + external NATS"
	}
	if os.Getenv("BENCH_ENGINES") == "sqlite+nats" {
		cfg.NATSURL = enginetest.NATSURL(t)
		cfg.NATSPrefix = natsPrefix(t, cfg.NATSURL)
		engines = "SQLite + external NATS"
	}
	cfg.Notify.GroupCommit = os.Getenv("BENCH_GROUP_COMMIT") != "0"
	cfg.Notify.MarketingCap = 0
	n := startNode(t, cfg)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}, Timeout: 60 * time.Second}
	t.Logf("engines: %s, group commit: %v", engines, cfg.Notify.GroupCommit)

	// Phase 1: single POSTs from many clients.
	seconds, clients := benchEnv("BENCH_SECONDS", 10), benchEnv("BENCH_CLIENTS", 64)
	var accepted atomic.Int64
	var latMu sync.Mutex
	var lats []time.Duration
	start := time.Now()
	deadline := start.Add(time.Duration(seconds) * time.Second)
	// BENCH_MIX=1 names the channels as the traffic in docs/benchmarks.md
	// does (1.75 provider calls per notification: three in four to email and push,
	// one in four to email only); otherwise every notification goes to
	// email, sms and push (and a suppressed webhook row).
	mix := os.Getenv("BENCH_MIX") == "1"
	perClient := make([]int64, clients)
	if path := os.Getenv("BENCH_GOROUTINES"); path != "" {
		// Where the goroutines wait halfway through: a queue on one lock
		// or one connection shows as many goroutines in one place.
		time.AfterFunc(time.Duration(seconds)*time.Second/2, func() {
			f, err := os.Create(path)
			if err != nil {
				t.Errorf("goroutine profile: %v", err)
				return
			}
			defer f.Close()
			if err := pprof.Lookup("goroutine").WriteTo(f, 1); err != nil {
				t.Errorf("goroutine profile: %v", err)
			}
		})
	}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			var mine []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				channels := ""
				if mix {
					channels = `,"channels":["email","push"]`
					if i%4 == 3 {
						channels = `,"channels":["email"]`
					}
				}
				body := fmt.Sprintf(`{"user_id":"u%d-%d","type":"order.confirmed","data":{"order":"%d","name":"Ann"}%s}`, c, i%100, i, channels)
				t0 := time.Now()
				resp, err := hc.Post(n.httpURL+"/v1/notifications", "application/json", strings.NewReader(body))
				if err != nil {
					t.Errorf("POST: %v", err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body) // read to the end, or the connection is not reused
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Errorf("POST: status %d", resp.StatusCode)
					return
				}
				perClient[c]++
				accepted.Add(1)
				mine = append(mine, time.Since(t0))
			}
			latMu.Lock()
			lats = append(lats, mine...)
			latMu.Unlock()
		})
	}
	wg.Wait()
	acceptTime := time.Since(start)
	slices.Sort(lats)
	total := accepted.Load()
	t.Logf("accepted %d notifications in %.1fs: %.0f/s; POST latency p50 %v, p99 %v",
		total, acceptTime.Seconds(), float64(total)/acceptTime.Seconds(), pct(lats, 50), pct(lats, 99))
	want := 3 * total // email, sms and push to the outbox
	if mix {
		want = 0
		for _, n := range perClient {
			want += 2*n - n/4 // every fourth request of a client names email only
		}
	}
	waitDelivered(t, hc, n.httpURL, "", want, 5*time.Minute)
	drained := time.Since(start)
	t.Logf("delivered %d (%.2f per notification) by %.1fs: %.0f deliveries/s", want, float64(want)/float64(total), drained.Seconds(), float64(want)/drained.Seconds())
	commits, writes, busy := metricValue(t, hc, n.httpURL, "sluice_store_commits_total"),
		metricValue(t, hc, n.httpURL, "sluice_store_committed_writes_total"),
		metricValue(t, hc, n.httpURL, "sluice_store_commit_busy_seconds_total")
	t.Logf("group commit: %.0f transactions, %.1f writes each, writer busy %.0f%% of the time", commits,
		writes/max(commits, 1), 100*busy/drained.Seconds())

	campaign := benchEnv("BENCH_CAMPAIGN", 100000)
	if campaign == 0 {
		return
	}
	// Phase 2: a campaign to `campaign` users (email + push each) while
	// OTPs are sent every 10ms until it has drained.
	base := deliveredCount(t, hc, n.httpURL, "marketing")
	start = time.Now()
	done := make(chan struct{})
	var otpIDs []string
	var otpWG sync.WaitGroup
	otpWG.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			resp, err := hc.Post(n.httpURL+"/v1/notifications", "application/json",
				strings.NewReader(fmt.Sprintf(`{"user_id":"otp%d","type":"otp","data":{"code":"%06d"},"channels":["sms"]}`, i, i)))
			if err != nil {
				t.Errorf("OTP: %v", err)
				return
			}
			var a struct {
				NotificationID string `json:"notification_id"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&a)
			resp.Body.Close()
			otpIDs = append(otpIDs, a.NotificationID)
		}
	})
	batches := make(chan int, (campaign+999)/1000) // every batch: no send waits on a worker
	for range 4 {
		wg.Go(func() {
			for from := range batches {
				var b bytes.Buffer
				b.WriteString(`{"notifications":[`)
				for i := from; i < min(from+1000, campaign); i++ {
					if i > from {
						b.WriteByte(',')
					}
					fmt.Fprintf(&b, `{"request_id":"bench-sale:m%d","user_id":"m%d","type":"flash_sale","data":{"discount":"30%%","name":"Ann"},"channels":["email","push"]}`, i, i)
				}
				b.WriteString(`]}`)
				resp, err := hc.Post(n.httpURL+"/v1/notifications/batch", "application/json", &b)
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
	sentByAccepted := deliveredCount(t, hc, n.httpURL, "marketing") - base
	waitDelivered(t, hc, n.httpURL, "marketing", base+2*int64(campaign), 10*time.Minute)
	drainedIn := time.Since(start)
	close(done)
	otpWG.Wait()
	var otpLat []time.Duration
	for _, id := range otpIDs {
		code, body := call(t, "GET", n.httpURL+"/v1/notifications/"+id, "")
		var got notificationBody
		if code != 200 || json.Unmarshal(body, &got) != nil || len(got.Deliveries) == 0 {
			continue
		}
		if d := got.Deliveries[0]; d.Status == "sent" {
			otpLat = append(otpLat, d.UpdatedAt.Sub(got.CreatedAt))
		}
	}
	slices.Sort(otpLat)
	t.Logf("campaign of %d users (%d deliveries): accepted in %.1fs (%.0f/s), drained in %.1fs (%.0f deliveries/s)",
		campaign, 2*campaign, acceptedIn.Seconds(), float64(campaign)/acceptedIn.Seconds(), drainedIn.Seconds(), float64(2*campaign)/drainedIn.Seconds())
	t.Logf("deliveries while accepting: %d in %.1fs (%.0f/s); after: %d in %.1fs (%.0f/s)",
		sentByAccepted, acceptedIn.Seconds(), float64(sentByAccepted)/acceptedIn.Seconds(),
		2*int64(campaign)-sentByAccepted, (drainedIn - acceptedIn).Seconds(),
		float64(2*int64(campaign)-sentByAccepted)/(drainedIn-acceptedIn).Seconds())
	t.Logf("OTPs during the campaign: %d sent; accept-to-delivery p50 %v, p99 %v, max %v",
		len(otpLat), pct(otpLat, 50), pct(otpLat, 99), pct(otpLat, 100))
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, len(sorted)*p/100)
	return sorted[i].Round(100 * time.Microsecond)
}

// deliveredCount sums sluice_notify_deliveries_total{status="sent"} of
// category (every category when empty).
func deliveredCount(t *testing.T, hc *http.Client, base, category string) int64 {
	t.Helper()
	var sum float64
	scanMetrics(t, hc, base, func(line string) {
		if strings.HasPrefix(line, "sluice_notify_deliveries_total{") && strings.Contains(line, `status="sent"`) &&
			(category == "" || strings.Contains(line, `category="`+category+`"`)) {
			f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			sum += f
		}
	})
	return int64(sum)
}

func waitDelivered(t *testing.T, hc *http.Client, base, category string, want int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := deliveredCount(t, hc, base, category)
		if got >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d of %d within %v", got, want, within)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
}

// metricValue returns the value of an unlabelled metric on base's /metrics.
func metricValue(t *testing.T, hc *http.Client, base, name string) float64 {
	t.Helper()
	var v float64
	scanMetrics(t, hc, base, func(line string) {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, _ = strconv.ParseFloat(rest, 64)
		}
	})
	return v
}

// scanMetrics calls each with every line of base's /metrics.
func scanMetrics(t *testing.T, hc *http.Client, base string, each func(line string)) {
	t.Helper()
	resp, err := hc.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		each(sc.Text())
	}
}

// benchEnv reads a benchmark knob: the integer in the environment variable
// name, or def.
func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
