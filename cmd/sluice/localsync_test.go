package main

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestLocalSyncInServe: a node on Redis decides a "sync": "local" policy's
// checks itself, the limit still holds, Redis sees a handful of script
// calls for 150 checks, and what the node admitted reaches Redis within
// a second (a peek, which reads Redis, shows the key spent).
func TestLocalSyncInServe(t *testing.T) {
	t.Parallel()
	redis := enginetest.StartRedis(t)
	cfg := testConfig(t)
	cfg.RedisURL = redis.URL()
	n := startNode(t, cfg)
	client := redisClient(t, redis.URL(), "")
	if code, body := send(t, "PUT", n.httpURL+"/v1/ratelimit/policies/edge",
		`{"algorithm":"fixed_window","limit":100,"period":"1h","sync":"local","sync_interval":"50ms"}`); code != 201 {
		t.Fatalf("PUT policy = %d %v", code, body)
	}
	scripts := func() int64 {
		info, err := client.Do(t.Context(), client.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
				n, _, _ := strings.Cut(v, ",")
				c, _ := strconv.ParseInt(n, 10, 64)
				return c
			}
		}
		return 0
	}
	before := scripts()
	allowed := 0
	for range 150 {
		code, body := send(t, "POST", n.httpURL+"/v1/ratelimit/check", `{"policy":"edge","key":"k"}`)
		if code != 200 {
			t.Fatalf("check = %d %v", code, body)
		}
		if body["allowed"] == true {
			allowed++
		}
	}
	calls := scripts() - before
	if allowed != 100 {
		t.Errorf("150 checks on a limit of 100 on one node: %d allowed, want 100", allowed)
	}
	// One call for the key's first check, then at most one per 50 ms.
	if calls > 40 {
		t.Errorf("150 checks made %d script calls, want a few (one per key per interval)", calls)
	}
	t.Logf("150 checks, %d script calls", calls)
	eventually(t, time.Second, "Redis holds every admitted check", func() (bool, string) {
		code, body := send(t, "GET", n.httpURL+"/v1/ratelimit/keys/edge/k", "")
		return code == 200 && body["remaining"] == 0.0, fmt.Sprint(code, body)
	})
}
