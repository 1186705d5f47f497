package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/bench"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// The chaos tests run one fault each against a node on engines the test
// starts itself (never the shared ones): load goes on while an engine
// stops and comes back, and the test checks what clients saw. Each logs
// its measured figures (docs/reliability.md quotes them).

// metric returns the value of the sample named by series (name plus
// labels, as /metrics writes it); ok is false when it is absent.
func metric(t *testing.T, base, series string) (float64, bool) {
	t.Helper()
	code, body := get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// load drives op from workers until stop is called, counting answers as
// they come so a test can wait for progress between faults.
type load struct {
	done   atomic.Int64
	stop   context.CancelFunc
	result chan bench.Result
}

// startLoad runs op on workers in a closed loop, at most for a minute.
func startLoad(t *testing.T, name string, workers int, op func(worker int) bench.Op) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{stop: cancel, result: make(chan bench.Result, 1)}
	go func() {
		res, err := bench.Run(ctx, name, "chaos", bench.Options{Workers: workers, Duration: time.Minute}, func(w int) bench.Op {
			inner := op(w)
			return func(ctx context.Context, seq int64) error {
				err := inner(ctx, seq)
				if err == nil {
					l.done.Add(1)
				}
				return err
			}
		})
		if err != nil {
			t.Error(err)
		}
		l.result <- res
	}()
	t.Cleanup(cancel)
	return l
}

// progress waits until n more requests have succeeded.
func (l *load) progress(t *testing.T, n int64, what string) {
	t.Helper()
	target := l.done.Load() + n
	enginetest.EventuallyNil(t, 20*time.Second, what, func() error {
		d := l.done.Load()
		return enginetest.State(d >= target, "%d of %d requests answered", d, target)
	})
}

// finish stops the load and returns what it measured.
func (l *load) finish() bench.Result {
	l.stop()
	return <-l.result
}

// TestChaosRedisRestartDuringLimiterLoad stops the node's Redis while
// clients check rate limits and starts it again: no client sees an error,
// sluice_ratelimit_store_up goes to 0 and back to 1, and no check waits
// long on the dead store.
func TestChaosRedisRestartDuringLimiterLoad(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	redis := enginetest.StartRedis(t)
	cfg := testConfig(t)
	cfg.RedisURL = redis.URL()
	// Long enough that a loaded CI machine does not trip the fallback
	// while Redis is up; short enough that checks go on when it is down.
	cfg.Ratelimit.StoreTimeout = 500 * time.Millisecond
	n := startNode(t, cfg)

	hc := bench.NewHTTPClient(8, 10*time.Second)
	var refused atomic.Int64
	l := startLoad(t, "check-http", 8, bench.HTTP(hc, "", func(seq int64) bench.Request {
		return bench.Request{Method: http.MethodPost, URL: n.httpURL + "/v1/ratelimit/check",
			Body: []byte(`{"policy":"enterprise","key":"chaos-` + strconv.FormatInt(seq%200, 10) + `"}`)}
	}, bench.ExpectDecision(&refused)))
	l.progress(t, 200, "checks on Redis")
	storeUp := func(want float64) func() error {
		return func() error {
			v, ok := metric(t, n.httpURL, "sluice_ratelimit_store_up")
			return enginetest.State(ok && v == want, "%s", fmt.Sprint("sluice_ratelimit_store_up ", v, ok))
		}
	}
	// A check slower than the store timeout trips the store even before the
	// fault when the machine is loaded; it must then come back by itself.
	enginetest.EventuallyNil(t, 20*time.Second, "store up on Redis", storeUp(1))

	stopped := time.Now()
	redis.Stop()
	enginetest.EventuallyNil(t, 20*time.Second, "sluice_ratelimit_store_up 0 with Redis down", storeUp(0))
	tripped := time.Since(stopped)
	l.progress(t, 200, "checks with Redis down")

	restarted := time.Now()
	redis.Start()
	enginetest.EventuallyNil(t, 30*time.Second, "sluice_ratelimit_store_up 1 with Redis back", storeUp(1))
	recovered := time.Since(restarted)
	l.progress(t, 200, "checks on Redis again")

	res := l.finish()
	if res.Errors != 0 {
		t.Errorf("%d of %d checks failed across the Redis restart (first: %s), want none", res.Errors, res.OK+res.Errors, res.FirstError)
	}
	if res.Latency.Max() > 2*time.Second {
		t.Errorf("slowest check took %v, want no multi-second waits on a dead store", res.Latency.Max())
	}
	t.Logf("redis restart under load: %d checks, %d errors; store_up 0 after %v, 1 again %v after restart; p99 %v, max %v",
		res.OK, res.Errors, tripped.Round(time.Millisecond), recovered.Round(time.Millisecond),
		res.Latency.Quantile(0.99).Round(time.Millisecond), res.Latency.Max().Round(time.Millisecond))
}

// TestChaosPostgresRestart stops the node's PostgreSQL: requests that need
// it get 503 problem+json with Retry-After (not 500) while rate limit
// checks and cached redirects keep answering (notifications too get 503:
// nothing is accepted that is not saved); when PostgreSQL is back the
// node serves again by itself, without a restart.
func TestChaosPostgresRestart(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	pg := enginetest.StartPostgres(t)
	cfg := testConfig(t)
	cfg.DatabaseURL = pg.URL()
	n := startNode(t, cfg)

	code, link := send(t, "POST", n.httpURL+"/v1/links", `{"url":"https://example.com/before"}`)
	if code != 201 {
		t.Fatalf("create link = %d %v", code, link)
	}
	redirect := n.httpURL + "/" + link["code"].(string)
	noFollow := bench.NewHTTPClient(1, 5*time.Second)
	status := func(method, url, body string) (int, http.Header, string) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header, resp.Header.Get("Content-Type")
	}
	if code, _, _ := status("GET", redirect, ""); code != 302 {
		t.Fatalf("redirect before the fault = %d, want 302", code)
	}
	// Writers keep creating links throughout: each must get 201 or 503,
	// never a 500 or a dropped connection.
	var unavailable atomic.Int64
	writers := startLoad(t, "create-link", 4, bench.HTTP(noFollow, "", func(seq int64) bench.Request {
		return bench.Request{Method: http.MethodPost, URL: n.httpURL + "/v1/links",
			Body: []byte(`{"url":"https://example.com/load/` + strconv.FormatInt(seq, 10) + `"}`)}
	}, func(code int, body []byte) error {
		if code == 503 && strings.Contains(string(body), "unavailable") {
			unavailable.Add(1)
			return nil
		}
		return bench.ExpectStatus(201)(code, body)
	}))
	writers.progress(t, 20, "links created before the fault")

	stopped := time.Now()
	pg.Stop()
	needsDB := []struct{ method, path, body string }{
		{"POST", "/v1/links", `{"url":"https://example.com/during"}`},
		{"GET", "/v1/links/" + link["code"].(string), ""},
		{"GET", "/v1/keys", ""},
		{"PUT", "/v1/ratelimit/policies/chaos", `{"algorithm":"fixed_window","limit":5,"period":"1m"}`},
		{"POST", "/v1/notifications", `{"user_id":"u1","type":"otp","data":{"code":"123456"}}`},
		{"GET", "/v1/users/u1/notifications", ""},
	}
	for _, r := range needsDB {
		code, h, ctype := status(r.method, n.httpURL+r.path, r.body)
		if code != 503 || h.Get("Retry-After") == "" || ctype != "application/problem+json" {
			t.Errorf("%s %s with PostgreSQL down = %d Retry-After %q %s; want 503 problem+json with Retry-After",
				r.method, r.path, code, h.Get("Retry-After"), ctype)
		}
	}
	// Checks keep answering through the outage, also after the auth
	// cache's 3 s TTL has run out (a stale answer serves while the
	// database cannot be asked): poll them for 4 s more (the creations
	// above each retried for up to 4 s before their 503).
	checks := 0
	for polling := time.Now(); time.Since(polling) < 4*time.Second; {
		// A new key every 1,000 checks: the loop can outrun the policy's
		// 6,000 a minute on one key.
		key := "pg-down-" + strconv.Itoa(checks/1000)
		code, body := send(t, "POST", n.httpURL+"/v1/ratelimit/check", `{"policy":"enterprise","key":"`+key+`"}`)
		if code != 200 || body["allowed"] != true {
			t.Errorf("rate limit check %v after PostgreSQL stopped = %d %v, want 200 allowed (policies and keys are cached)",
				time.Since(stopped).Round(time.Millisecond), code, body)
			break
		}
		checks++
	}
	if code, _, _ := status("GET", redirect, ""); code != 302 {
		t.Errorf("cached redirect with PostgreSQL down = %d, want 302", code)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "/readyz names the database", func() error {
		code, body := get(t, n.httpURL+"/readyz")
		return enginetest.State(code == 503 && strings.Contains(string(body), "database"), "%s", fmt.Sprint(code, string(body)))
	})
	down := time.Since(stopped)

	restarted := time.Now()
	pg.Start()
	enginetest.EventuallyNil(t, 15*time.Second, "links created again once PostgreSQL is back", func() error {
		code, body := send(t, "POST", n.httpURL+"/v1/links", `{"url":"https://example.com/after"}`)
		return enginetest.State(code == 201, "%s", fmt.Sprint(code, body))
	})
	recovered := time.Since(restarted)
	enginetest.EventuallyNil(t, 10*time.Second, "/readyz ready again", func() error {
		code, body := get(t, n.httpURL+"/readyz")
		return enginetest.State(code == 200, "%s", string(body))
	})
	writers.progress(t, 20, "links created after the fault")
	res := writers.finish()
	if res.Errors != 0 || unavailable.Load() == 0 {
		t.Errorf("link writers across the restart: %d errors (first: %s), %d answered 503; want no errors and some 503s",
			res.Errors, res.FirstError, unavailable.Load())
	}
	t.Logf("postgres restart: %d writes answered 201 or 503 (503: %d, other: %d); %d checks answered 200 over the outage (%v); writes served again %v after restart",
		res.OK, unavailable.Load(), res.Errors, checks, down.Round(time.Millisecond), recovered.Round(time.Millisecond))
}
