package scale_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/notify"
)

const stepHeader = "| links | clicks | notifications | start to ready | redirects/s (of the empty store's) | redirect p50 / p99 | GET link p99 | stats by country p99 | clicks by hour p99 | top links p99 | user history p99 | dead letters p99 | recovery sweep | bytes per click |"
const stepRule = "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"

// stepFigures is what one step measured.
type stepFigures struct {
	start    time.Duration
	redirect bench.Result
	reads    []*bench.Histogram // in the order of readNames
	sweep    time.Duration
}

var readNames = []string{"link", "stats", "clicks", "top", "history", "dead"}

func (m stepFigures) row(g *grower) string {
	var b strings.Builder
	if g.emptyRate == 0 {
		g.emptyRate = m.redirect.Rate()
	}
	fmt.Fprintf(&b, "| %d | %d | %d | %s | %.0f (%.0f%%) | %s / %s |", g.links, g.clicks, g.notifs, ms(m.start), m.redirect.Rate(), 100*m.redirect.Rate()/g.emptyRate,
		ms(m.redirect.Latency.Quantile(0.5)), ms(m.redirect.Latency.Quantile(0.99)))
	for _, h := range m.reads {
		fmt.Fprintf(&b, " %s |", ms(h.Quantile(0.99)))
	}
	fmt.Fprintf(&b, " %s | %.1f |\n", ms(m.sweep), g.bytesPC)
	return b.String()
}

// ms prints a latency in milliseconds, or in microseconds below one.
func ms(d time.Duration) string {
	if d < time.Millisecond {
		return strconv.FormatFloat(float64(d)/1e3, 'f', 1, 64) + " µs"
	}
	return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms"
}

// measureStep starts a node on the grown store, measures it from outside
// and stops it.
func measureStep(t *testing.T, bin, engine, dbURL, dir string, g *grower) stepFigures {
	t.Helper()
	ctx := context.Background()
	var m stepFigures
	n, took := startNode(t, bin, dbURL, dir)
	defer n.stop()
	m.start = took

	hc := bench.NewHTTPClient(64, 10*time.Second)
	codes := g.codes
	get := func(seq int64) bench.Request {
		return bench.Request{Method: http.MethodGet, URL: n.base + "/" + codes[seq%int64(len(codes))], UserAgent: bench.BrowserUserAgent}
	}
	// A first pass warms the cache as a running node's would be.
	if _, err := bench.Run(ctx, "redirect", "warm", bench.Options{Workers: 8, Requests: int64(len(codes))}, bench.HTTP(hc, "", get, bench.ExpectStatus(http.StatusFound))); err != nil {
		t.Fatalf("warm redirects: %v", err)
	}
	res, err := bench.Run(ctx, "redirect", engine, bench.Options{Workers: 64, Duration: *runFor}, bench.HTTP(hc, "", get, bench.ExpectStatus(http.StatusFound)))
	if err != nil || res.Errors > 0 {
		t.Fatalf("redirects: %v (%d errors, first %s)", err, res.Errors, res.FirstError)
	}
	m.redirect = res

	hot := codes[0]
	rnd := g.rnd
	paths := map[string]func() string{
		"link":    func() string { return "/v1/links/" + codes[rnd.IntN(len(codes))] },
		"stats":   func() string { return "/v1/links/" + hot + "/stats?group=country" },
		"clicks":  func() string { return "/v1/links/" + hot + "/clicks" },
		"top":     func() string { return "/v1/stats/links" },
		"history": func() string { return "/v1/users/u" + strconv.FormatInt(rnd.Int64N(g.users), 10) + "/notifications" },
		"dead":    func() string { return "/v1/dead-letters" },
	}
	for _, name := range readNames {
		h := new(bench.Histogram)
		for range *samples {
			began := time.Now()
			if err := n.get(paths[name]()); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			h.Record(time.Since(began))
		}
		m.reads = append(m.reads, h)
	}
	m.sweep = g.sweep(ctx)
	return m
}

// sweep times one pass of the recovery sweep's queries: due deliveries,
// and the stale queued ones of every channel and category.
func (g *grower) sweep(ctx context.Context) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 5 {
		began := time.Now()
		if _, err := g.db.DueDeliveries(ctx, time.Now(), 500); err != nil {
			g.t.Fatalf("due deliveries: %v", err)
		}
		for _, ch := range notify.Channels {
			for _, c := range notify.Categories {
				if _, err := g.db.StaleDeliveries(ctx, ch, c, time.Now().Add(-time.Minute), 500); err != nil {
					g.t.Fatalf("stale deliveries: %v", err)
				}
			}
		}
		best = min(best, time.Since(began))
	}
	return best
}

// node is one `sluice serve` process on the grown store.
type node struct {
	cmd    *exec.Cmd
	base   string
	exited chan struct{}
	hc     *http.Client
}

// startNode runs `sluice serve` on dir (and dbURL when set) on spare
// ports, with extra flags, and returns once it logs that it serves, with
// how long that took.
func startNode(t *testing.T, bin, dbURL, dir string, extra ...string) (*node, time.Duration) {
	t.Helper()
	args := []string{"serve", "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--data-dir", dir, "--log-format", "json"}
	if dbURL != "" {
		args = append(args, "--database-url", dbURL)
	}
	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SLUICE_DATABASE_URL=", "SLUICE_NATS_URL=", "SLUICE_REDIS_URL=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n := &node{cmd: cmd, exited: make(chan struct{}), hc: &http.Client{Timeout: 30 * time.Second}}
	addr := make(chan string, 1)
	var tail strings.Builder
	go func() {
		defer close(n.exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e struct{ Msg, Level, HTTP string }
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				if e.Msg == "sluice serving" {
					select {
					case addr <- e.HTTP:
					default:
					}
				}
				if e.Level == "ERROR" && tail.Len() < 1<<16 {
					tail.Write(sc.Bytes())
					tail.WriteByte('\n')
				}
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case a := <-addr:
		n.base = "http://" + a
		return n, time.Since(began)
	case <-n.exited:
		t.Fatalf("sluice serve exited before serving")
	case <-time.After(10 * time.Minute):
		_ = cmd.Process.Kill()
		<-n.exited
		t.Fatalf("sluice serve did not start within 10 minutes")
	}
	return nil, 0
}

// stop ends the node with SIGTERM and waits for it (a minute at most).
func (n *node) stop() {
	_ = n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.exited:
	case <-time.After(time.Minute):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
}

// get sends GET path and wants a 200.
func (n *node) get(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return nil
}
