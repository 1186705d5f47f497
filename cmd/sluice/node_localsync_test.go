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
// a few intervals (a peek, which reads Redis, shows the key spent).
func TestLocalSyncInServe(t *testing.T) {
	t.Parallel()
	redis := enginetest.StartRedis(t)
	cfg := testConfig(t)
	cfg.RedisURL = redis.URL()
	cfg.Ratelimit.StoreTimeout = 10 * time.Second // at load 10 the default 250 ms passes: the checks fell back to the local limiter (102 of 100 admitted, 81 script calls)
	n := startNode(t, cfg)
	client := redisClient(t, redis.URL(), "")
	if code, body := send(t, "PUT", n.httpURL+"/v1/ratelimit/policies/edge",
		`{"algorithm":"fixed_window","limit":100,"period":"1h","sync":"local","sync_interval":"500ms"}`); code != 201 {
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
	before, began := scripts(), time.Now()
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
	calls, took := scripts()-before, time.Since(began)
	if allowed != 100 {
		t.Errorf("150 checks on a limit of 100 on one node: %d allowed, want 100", allowed)
	}
	// One call for the key's first check, then at most one per interval
	// (the bound follows the time the checks took, so a slow machine does
	// not fail it).
	if most := 3 + int64(took/(500*time.Millisecond)); calls > most || calls >= 150 {
		t.Errorf("150 checks in %s made %d script calls, want at most %d (one per key per interval)", took, calls, most)
	}
	t.Logf("150 checks in %s, %d script calls", took, calls)
	enginetest.EventuallyNil(t, 20*time.Second, "Redis holds every admitted check", func() error {
		code, body := send(t, "GET", n.httpURL+"/v1/ratelimit/keys/edge/k", "")
		return enginetest.State(code == 200 && body["remaining"] == 0.0, "%s", fmt.Sprint(code, body))
	})
}
