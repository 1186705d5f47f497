package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// send is roundTrip through apiClient, the answer decoded as a JSON
// object (nil when it is none).
func send(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	code, raw := roundTrip(t, apiClient, method, url, body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return code, out
}

// sharedEngines is testConfig on a PostgreSQL schema, a Redis server and
// a NATS server of the test's own, for the nodes of one test to share.
func sharedEngines(t *testing.T) config.Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.DatabaseURL = enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	cfg.RedisURL, cfg.NATSURL = enginetest.StartRedis(t).URL(), enginetest.StartNATS(t).URL()
	// The most Redis may take before a check falls back to the node's own
	// limiter: at load 10 the default 250 ms passes, and a fallen-back node
	// admits on its own, which these tests count as a shared limit broken.
	cfg.Ratelimit.StoreTimeout = 10 * time.Second
	return cfg
}

// TestTwoNodesShareOneService runs two `sluice serve` nodes on one
// PostgreSQL, one Redis and one NATS: a policy change and a block made
// through one are enforced by the other at once, a limit is shared,
// not doubled, and a link deleted through one stops redirecting on the
// other at once although that node caches links for an hour (milliseconds
// when quiet; the waits allow 20 s, for a loaded machine, and log the time).
func TestTwoNodesShareOneService(t *testing.T) {
	t.Parallel()
	cfg := sharedEngines(t)
	cfg.Ratelimit.Nodes = 2
	cfg.Ratelimit.RefreshInterval = time.Hour // only the push path can make it in time
	cfg.Links.CacheTTL = time.Hour            // likewise for a deleted link
	a := startNode(t, cfg)
	cfg.DataDir = t.TempDir()
	b := startNode(t, cfg)

	start := time.Now()
	if code, body := send(t, "PUT", a.httpURL+"/v1/ratelimit/policies/shared",
		`{"algorithm":"fixed_window","limit":10,"period":"1h"}`); code != 201 {
		t.Fatalf("PUT policy on A = %d %v", code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "B serves the policy created on A", func() error {
		code, body := send(t, "GET", b.httpURL+"/v1/ratelimit/policies/shared", "")
		return enginetest.State(code == 200, "%s", fmt.Sprint(code, body))
	})
	t.Logf("policy created on A served by B after %v", time.Since(start))

	check := func(n *testNode, key string) bool {
		code, body := send(t, "POST", n.httpURL+"/v1/ratelimit/check", `{"policy":"shared","key":"`+key+`"}`)
		if code != 200 {
			t.Fatalf("check = %d %v", code, body)
		}
		return body["allowed"] == true
	}
	allowed := 0
	for i := range 30 {
		n := a
		if i%2 == 1 {
			n = b
		}
		if check(n, "k") {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("30 checks spread over two nodes admitted %d, want 10 (one shared limit, not one per node)", allowed)
	}

	start = time.Now()
	if code, body := send(t, "POST", b.httpURL+"/v1/ratelimit/blocks", `{"key":"mallory","duration":"10m","reason":"abuse"}`); code != 201 {
		t.Fatalf("POST block on B = %d %v", code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "A enforces the block made on B", func() error {
		return enginetest.State(!check(a, "mallory"), "%s", "")
	})
	t.Logf("block made on B enforced by A after %v", time.Since(start))

	code, body := send(t, "POST", a.httpURL+"/v1/links", `{"url":"https://example.com/gone","slug":"gone"}`)
	if code != 201 {
		t.Fatalf("POST link on A = %d %v", code, body)
	}
	redirect := func(n *testNode) int {
		resp, err := noFollow.Get(n.httpURL + "/gone")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := redirect(b); got != http.StatusFound { // now cached on B for an hour
		t.Fatalf("GET /gone on B = %d, want 302", got)
	}
	start = time.Now()
	if code, body := send(t, "DELETE", a.httpURL+"/v1/links/gone", ""); code != 204 {
		t.Fatalf("DELETE link on A = %d %v", code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "B stops redirecting the link deleted on A", func() error {
		got := redirect(b)
		return enginetest.State(got == http.StatusNotFound, "%s", fmt.Sprint(got))
	})
	t.Logf("link deleted on A stopped redirecting on B after %v", time.Since(start))

	code, out, errs := runCLI(t, nil, "check", "--server", a.httpURL, "--policy", "free", "api_key:abc")
	if code != 0 || !strings.HasPrefix(out, "allowed\tfree\tapi_key:abc\tremaining 59/60") {
		t.Errorf("sluice check = %d %q %q, want allowed with 59 of 60 left", code, out, errs)
	}
	code, out, _ = runCLI(t, map[string]string{"SLUICE_SERVER": a.httpURL}, "check", "--policy", "free", "--cost", "60", "api_key:abc")
	if code != 1 || !strings.HasPrefix(out, "refused") {
		t.Errorf("sluice check over the limit = %d %q, want exit 1 and refused", code, out)
	}
}

// TestGatewayInServe runs serve with a gateway in front of an upstream.
func TestGatewayInServe(t *testing.T) {
	t.Parallel()
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") })}
	ln := listenLocal(t)
	go up.Serve(ln)
	t.Cleanup(func() { up.Close() })
	cfg := testConfig(t)
	cfg.Gateway.Listen, cfg.Gateway.Upstream = "127.0.0.1:0", "http://"+ln.Addr().String()
	cfg.Gateway.AnonymousPolicy = "free"
	gwAddr := startNode(t, cfg).gatewayAddr
	resp, err := apiClient.Get("http://" + gwAddr + "/anything")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !bytes.Equal(body, []byte("up")) || resp.Header.Get("RateLimit") != `"free";r=59;t=1` {
		t.Errorf("through the gateway: %d %q RateLimit %q, want the upstream's answer with the free tier's headers",
			resp.StatusCode, body, resp.Header.Get("RateLimit"))
	}
}

func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestHotKeysHearEveryChange runs two nodes on one PostgreSQL, Redis and
// NATS, each remembering refused keys until their retry time (an hour
// here): a key refused on A and reset on B, a limit raised on B, and a
// block made then lifted on B all reach A at once: milliseconds when quiet
// (the waits allow 20 s, for a loaded machine, and log the time).
func TestHotKeysHearEveryChange(t *testing.T) {
	t.Parallel()
	cfg := sharedEngines(t)
	cfg.Ratelimit.HotKeys = 1000
	cfg.Ratelimit.RefreshInterval = time.Hour // only the push path can make it in time
	a := startNode(t, cfg)
	cfg.DataDir = t.TempDir()
	b := startNode(t, cfg)

	if code, body := send(t, "PUT", b.httpURL+"/v1/ratelimit/policies/hourly",
		`{"algorithm":"fixed_window","limit":1,"period":"1h"}`); code != 201 {
		t.Fatalf("PUT policy on B = %d %v", code, body)
	}
	check := func(n *testNode, key string) (bool, string) {
		code, body := send(t, "POST", n.httpURL+"/v1/ratelimit/check", `{"policy":"hourly","key":"`+key+`"}`)
		if code != 200 && code != 404 { // 404: the policy has not reached A yet
			t.Fatalf("check = %d %v", code, body)
		}
		return code == 200 && body["allowed"] == true, fmt.Sprint(code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "A admits k once", func() error { ok, state := check(a, "k"); return enginetest.State(ok, "%s", state) })
	// Refused, and now remembered on A for an hour.
	if ok, state := check(a, "k"); ok {
		t.Fatalf("second check of k on A at 1 per hour admitted: %s", state)
	}

	start := time.Now()
	if code, body := send(t, "DELETE", b.httpURL+"/v1/ratelimit/keys/hourly/k", ""); code != 204 {
		t.Fatalf("reset on B = %d %v", code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "A admits k reset on B", func() error { ok, state := check(a, "k"); return enginetest.State(ok, "%s", state) })
	t.Logf("key reset on B admitted by A after %v", time.Since(start))

	if ok, state := check(a, "k"); ok {
		t.Fatalf("check of k on A after its one admission admitted: %s", state)
	}
	start = time.Now()
	if code, body := send(t, "PUT", b.httpURL+"/v1/ratelimit/policies/hourly",
		`{"algorithm":"fixed_window","limit":5,"period":"1h"}`); code != 200 {
		t.Fatalf("raise the limit on B = %d %v", code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "A admits k under the limit raised on B", func() error { ok, state := check(a, "k"); return enginetest.State(ok, "%s", state) })
	t.Logf("limit raised on B admitted by A after %v", time.Since(start))

	start = time.Now()
	if code, body := send(t, "POST", b.httpURL+"/v1/ratelimit/blocks", `{"key":"j","duration":"10m","reason":"abuse"}`); code != 201 {
		t.Fatalf("POST block on B = %d %v", code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "A refuses j blocked on B", func() error {
		ok, state := check(a, "j")
		return enginetest.State(!ok, "%s", state)
	})
	t.Logf("block made on B enforced by A after %v", time.Since(start))
	start = time.Now()
	if code, body := send(t, "DELETE", b.httpURL+"/v1/ratelimit/blocks/j", ""); code != 204 {
		t.Fatalf("DELETE block on B = %d %v", code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "A admits j unblocked on B", func() error { ok, state := check(a, "j"); return enginetest.State(ok, "%s", state) })
	t.Logf("block lifted on B no longer enforced by A after %v", time.Since(start))
}
