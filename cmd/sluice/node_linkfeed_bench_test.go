package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
)

// TestLinkLiveBenchmark measures the live stats stream's latency for
// docs/benchmarks.md: BENCH_STREAMS streams (default 100) open on
// BENCH_LINKS links (default 10) while redirects arrive at BENCH_RATE a
// second (default 1,000) for BENCH_SECONDS (default 10), on a node with
// its default flush interval (or BENCH_FLUSH_MS), load generator and
// streams in this process.
// The latency of an event is when its stream read it minus the hit's
// recorded time. Skipped unless SLUICE_LIVE_BENCH=1.
func TestLinkLiveBenchmark(t *testing.T) {
	if os.Getenv("SLUICE_LIVE_BENCH") == "" {
		t.Skip("set SLUICE_LIVE_BENCH=1 to measure (see docs/benchmarks.md)")
	}
	knob := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	streams, links, rate, seconds := knob("BENCH_STREAMS", 100), knob("BENCH_LINKS", 10), knob("BENCH_RATE", 1000), knob("BENCH_SECONDS", 10)
	cfg := testConfig(t)
	if ms := knob("BENCH_FLUSH_MS", 0); ms > 0 {
		cfg.Links.FlushInterval = time.Duration(ms) * time.Millisecond
	}
	n := startNode(t, cfg)
	codes := make([]string, links)
	for i := range codes {
		code, raw := call(t, "POST", n.httpURL+"/v1/links", fmt.Sprintf(`{"url":"https://example.com/live/%d"}`, i))
		var l struct{ Code string }
		if code != 201 || json.Unmarshal(raw, &l) != nil {
			t.Fatalf("POST /v1/links = %d %s", code, raw)
		}
		codes[i] = l.Code
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(seconds)*time.Second+time.Minute)
	defer cancel()
	want := rate * seconds * streams / links
	var (
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
		all       = make(chan struct{}) // closed when every event came
	)
	c := client.New(n.httpURL, "")
	for i := range streams {
		s, err := c.LinkHits(ctx, codes[i%links], "")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer s.Close()
			for {
				h, err := s.Next()
				if err != nil {
					return // ctx ended
				}
				took := time.Since(h.At)
				mu.Lock()
				if latencies = append(latencies, took); len(latencies) == want {
					close(all)
				}
				mu.Unlock()
			}
		})
	}
	hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	total := rate * seconds
	work := make(chan int, total)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	var senders sync.WaitGroup
	for range 32 {
		senders.Go(func() {
			for i := range work {
				req, _ := http.NewRequestWithContext(ctx, "GET", n.httpURL+"/"+codes[i%links], nil)
				req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0")
				if resp, err := hc.Do(req); err == nil {
					resp.Body.Close()
				}
			}
		})
	}
	start := time.Now()
	for i := range total {
		<-tick.C
		work <- i
	}
	tick.Stop()
	close(work)
	senders.Wait()
	sent := time.Since(start)
	select {
	case <-all:
	case <-time.After(30 * time.Second): // reported below as events missing
	}
	cancel()
	wg.Wait()
	slices.Sort(latencies)
	if len(latencies) == 0 {
		t.Fatal("no events")
	}
	q := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	t.Logf("%d redirects in %s (%.0f/s), %d streams on %d links: %d of %d events; redirect to event p50 %s, p99 %s, max %s",
		total, sent.Round(time.Millisecond), float64(total)/sent.Seconds(), streams, links, len(latencies), want,
		q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), latencies[len(latencies)-1].Round(time.Millisecond))
}
