package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/redisconn"
)

// readyzState polls /readyz for wantCode; with wantNamed, the problem's
// detail must name that engine ("redis: ...").
func readyzState(t *testing.T, base string, wantCode int, wantNamed string) func() error {
	return func() error {
		code, body := get(t, base+"/readyz")
		ok := code == wantCode
		if ok && wantNamed != "" {
			var p struct{ Detail string }
			_ = json.Unmarshal(body, &p)
			ok = strings.Contains(p.Detail, wantNamed+":")
		}
		return enginetest.State(ok, "%d %s", code, body)
	}
}

// metricState polls /metrics until series has the value want.
func metricState(t *testing.T, base, series string, want float64) func() error {
	return func() error {
		v, ok := metric(t, base, series)
		return enginetest.State(ok && v == want, "%s", fmt.Sprint(series, " ", v, " present ", ok))
	}
}

// redisClient is a second client on url, to look at what the node wrote.
func redisClient(t *testing.T, url, caFile string) rueidis.Client {
	t.Helper()
	c, err := redisconn.Open(redisconn.Options{URL: url, CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if c.Client() == nil {
		t.Fatalf("second client on %s: %v", url, c.Err())
	}
	return c.Client()
}

// redisHas reports whether some key matching pattern exists on any node
// the client reaches (every master of a Cluster).
func redisHas(t *testing.T, client rueidis.Client, pattern string) bool {
	t.Helper()
	for _, node := range client.Nodes() {
		keys, err := node.Do(t.Context(), node.B().Keys().Pattern(pattern).Build()).AsStrSlice()
		if err != nil {
			t.Fatalf("KEYS %s: %v", pattern, err)
		}
		if len(keys) > 0 {
			return true
		}
	}
	return false
}

// checkFree asks the node for one check of the free tier (60 a minute) on key.
func checkFree(t *testing.T, base, key string) map[string]any {
	t.Helper()
	code, body := send(t, "POST", base+"/v1/ratelimit/check", `{"policy":"free","key":"`+key+`"}`)
	if code != 200 {
		t.Fatalf("check %s = %d %v, want 200", key, code, body)
	}
	return body
}

// checkCountedInRedis checks keys prefix1, prefix2, ... on the free tier
// until one is allowed at the full limit of 60 (59 left) and its counter
// is in Redis (client). One slow call on a busy machine (a TLS handshake,
// a script load) may trip the node onto its local limiters until the next
// probe: that is the failover working, not what the callers test, so each
// try uses a fresh key.
func checkCountedInRedis(t *testing.T, base string, client rueidis.Client, prefix string) {
	t.Helper()
	try := 0
	enginetest.EventuallyNil(t, 30*time.Second, "a check counted in Redis at the full limit", func() error {
		try++
		key := fmt.Sprint(prefix, try)
		d := checkFree(t, base, key)
		if d["allowed"] != true || d["limit"] != 60.0 || d["remaining"] != 59.0 {
			return fmt.Errorf("check %s = %v, want the full limit of 60 (59 left)", key, d)
		}
		return enginetest.State(redisHas(t, client, "sluice:rl:*"+key+"*"), "no counter for %s in Redis", key)
	})
}

// TestServeStartsWithRedisDown starts a node while its Redis is stopped:
// the node serves, checks are decided on the local fallback (the free
// tier's 60 a minute shared by two nodes: 30 here), the link shortener
// and request_id deduplication work without Redis, /metrics shows
// sluice_ratelimit_store_up 0 and /readyz is not ready, naming redis.
// When Redis starts, the node connects by itself: store_up 1, /readyz
// ready, checks count in Redis at the full limit, and links and request
// ids are kept there, as a second client sees.
func TestServeStartsWithRedisDown(t *testing.T) {
	t.Parallel()
	redis := enginetest.StartRedis(t)
	redis.Stop()
	cfg := testConfig(t)
	cfg.RedisURL = redis.URL()
	cfg.Ratelimit.Nodes = 2
	started := time.Now()
	n := startNode(t, cfg)
	if took := time.Since(started); took > 15*time.Second {
		t.Errorf("the node took %v to start with Redis down, want no long wait on it", took)
	}

	if d := checkFree(t, n.httpURL, "early"); d["allowed"] != true || d["limit"] != 30.0 {
		t.Errorf("check with Redis down = %v, want allowed on the local fallback at 60 / 2 nodes = 30", d)
	}
	if v, ok := metric(t, n.httpURL, `sluice_ratelimit_fallback_decisions_total{on_store_failure="open",policy="free"}`); !ok || v < 1 {
		t.Errorf("fallback decisions = %v (present %v), want the check counted as decided locally", v, ok)
	}
	if err := metricState(t, n.httpURL, "sluice_ratelimit_store_up", 0)(); err != nil {
		t.Errorf("with Redis down: %v, want 0", err)
	}
	if err := readyzState(t, n.httpURL, 503, "redis")(); err != nil {
		t.Errorf("/readyz with Redis down = %v, want 503 naming redis", err)
	}
	if code, body := send(t, "POST", n.httpURL+"/v1/links", `{"url":"https://example.com/early","slug":"early"}`); code != 201 {
		t.Fatalf("create a link with Redis down = %d %v", code, body)
	}
	redirect := func(code string) {
		t.Helper()
		resp, err := noFollow.Get(n.httpURL + "/" + code)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			t.Errorf("GET /%s = %d, want 302", code, resp.StatusCode)
		}
	}
	redirect("early")
	notification := func(requestID string, want int) {
		t.Helper()
		body := `{"request_id":"` + requestID + `","user_id":"u1","type":"order.shipped","data":{"order":"#1","name":"Ann"}}`
		if code, resp := send(t, "POST", n.httpURL+"/v1/notifications", body); code != want {
			t.Errorf("POST notification %s = %d %v, want %d", requestID, code, resp, want)
		}
	}
	notification("early-1", 202)
	notification("early-1", 200) // a duplicate, caught by the record store

	redis.Start()
	restarted := time.Now()
	enginetest.EventuallyNil(t, 30*time.Second, "sluice_ratelimit_store_up 1 once Redis starts",
		metricState(t, n.httpURL, "sluice_ratelimit_store_up", 1))
	enginetest.EventuallyNil(t, 30*time.Second, "/readyz ready once Redis starts", readyzState(t, n.httpURL, 200, ""))
	t.Logf("Redis started %v after the node; store up and /readyz ready %v later",
		restarted.Sub(started).Round(time.Millisecond), time.Since(restarted).Round(time.Millisecond))

	second := redisClient(t, redis.URL(), "")
	checkCountedInRedis(t, n.httpURL, second, "late")
	if code, body := send(t, "POST", n.httpURL+"/v1/links", `{"url":"https://example.com/late","slug":"late"}`); code != 201 {
		t.Fatalf("create a link = %d %v", code, body)
	}
	redirect("late")
	if !redisHas(t, second, "sluice:link:late") {
		t.Error("the link resolved after Redis connected is not in the shared cache")
	}
	notification("late-1", 202)
	if !redisHas(t, second, "sluice:notify:req:late-1") {
		t.Error("the request_id sent after Redis connected is not claimed in Redis")
	}
}

// TestServeRedisAddresses runs a node on each kind of address
// --redis-url names besides one server: a Cluster from one seed, a
// Sentinel group, and rediss:// checked against --redis-ca-file. Each is
// ready with the store up, and checks count in that Redis.
func TestServeRedisAddresses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		start func(t *testing.T) (url, ca string)
	}{
		{"cluster", func(t *testing.T) (string, string) { return enginetest.StartRedisCluster(t, 3, 0).Nodes[0].URL(), "" }},
		{"sentinel", func(t *testing.T) (string, string) { return enginetest.StartRedisSentinel(t, 2).URL(), "" }},
		{"tls", func(t *testing.T) (string, string) {
			r := enginetest.StartRedisTLS(t)
			return r.URL(), r.CAFile
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, ca := tt.start(t)
			cfg := testConfig(t)
			cfg.RedisURL, cfg.RedisCAFile = url, ca
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate(%s) = %v", url, err)
			}
			n := startNode(t, cfg)
			if err := readyzState(t, n.httpURL, 200, "")(); err != nil {
				t.Errorf("/readyz = %v, want ready", err)
			}
			checkCountedInRedis(t, n.httpURL, redisClient(t, url, ca), "k")
			if err := metricState(t, n.httpURL, "sluice_ratelimit_store_up", 1)(); err != nil {
				t.Errorf("%v after a check counted in Redis, want 1", err)
			}
		})
	}
}
