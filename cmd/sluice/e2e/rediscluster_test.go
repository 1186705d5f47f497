package e2e

import (
	"bufio"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// keysOnMasters returns, for each prefix, one key per slot range of a
// 3-master cluster (0-5460, 5461-10922, 10923-16383), in slot order, as
// the cluster itself hashes them (CLUSTER KEYSLOT). The store names a key
// prefix{key}:..., so a key's slot is its own.
func keysOnMasters(t *testing.T, rc *enginetest.RedisCluster, prefix string) [3]string {
	t.Helper()
	client := enginetest.RedisClient(t, rc.URL(), enginetest.NoClientCache)
	var out [3]string
	for i, found := 0, 0; found < 3; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		slot, err := client.Do(t.Context(), client.B().ClusterKeyslot().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if m := slot * 3 / 16384; out[m] == "" {
			out[m] = k
			found++
		}
	}
	return out
}

// storeUpWatch polls sluice_ratelimit_store_up on every node until stop,
// and reports whether any scrape saw 0.
type storeUpWatch struct {
	wg   sync.WaitGroup
	stop chan struct{}
	down atomic.Int64 // scrapes that read 0
	seen atomic.Int64 // scrapes that read the gauge
}

func watchStoreUp(c *cluster) *storeUpWatch {
	w := &storeUpWatch{stop: make(chan struct{})}
	for _, n := range c.nodes {
		w.wg.Go(func() {
			for {
				select {
				case <-w.stop:
					return
				case <-time.After(20 * time.Millisecond): // scrape interval
				}
				switch storeUp(n.httpURL) {
				case "0":
					w.down.Add(1)
					w.seen.Add(1)
				case "1":
					w.seen.Add(1)
				}
			}
		})
	}
	return w
}

func (w *storeUpWatch) end() (down, seen int64) {
	close(w.stop)
	w.wg.Wait()
	return w.down.Load(), w.seen.Load()
}

// storeUp reads the sluice_ratelimit_store_up gauge from a node's
// /metrics; "" when the scrape fails.
func storeUp(base string) string {
	resp, err := apiClient.Get(base + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "sluice_ratelimit_store_up "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestTwoNodesOnRedisCluster runs two `sluice serve` processes on a real
// 3-master Redis Cluster: every algorithm admits exactly its limit across
// both nodes, multi-key checks across slots are all-or-nothing whichever
// key refuses, a contended run of cross-slot checks never over-admits a
// key, and the store stays up throughout (a cross-slot check is not an
// outage).
func TestTwoNodesOnRedisCluster(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	rc := enginetest.StartRedisCluster(t, 3, 0)
	c := startNodes(t, 2, rc.URL())
	watch := watchStoreUp(c)

	algorithms := []string{"token_bucket", "gcra", "fixed_window", "sliding_window_log", "sliding_window_counter", "concurrency"}
	const limit = 8
	for _, alg := range algorithms {
		policy := "cl-" + strings.ReplaceAll(alg, "_", "-")
		if code, body := c.call(t, 0, "PUT", "/v1/ratelimit/policies/"+policy,
			fmt.Sprintf(`{"algorithm":%q,"limit":%d,"period":"1h"}`, alg, limit)); code != 201 {
			t.Fatalf("PUT %s = %d %v", policy, code, body)
		}
	}
	// Both nodes know every policy before checks start.
	for _, alg := range algorithms {
		policy := "cl-" + strings.ReplaceAll(alg, "_", "-")
		c.propagation(t, 0, time.Now(), "policy "+policy, func(code int, _ map[string]any) bool { return code == 200 },
			"GET", "/v1/ratelimit/keys/"+policy+"/probe")
	}

	t.Run("exact limit across nodes", func(t *testing.T) {
		for _, alg := range algorithms {
			policy := "cl-" + strings.ReplaceAll(alg, "_", "-")
			for m, key := range keysOnMasters(t, rc, policy+"-") {
				allowed := 0
				for i := range 2 * limit {
					code, body := c.call(t, i%2, "POST", "/v1/ratelimit/check", fmt.Sprintf(`{"policy":%q,"key":%q}`, policy, key))
					if code != 200 {
						t.Fatalf("%s check = %d %v", policy, code, body)
					}
					if body["allowed"] == true {
						allowed++
					}
				}
				if allowed != limit {
					t.Errorf("%s on master %d: %d checks over two nodes admitted %d, want %d", alg, m, 2*limit, allowed, limit)
				}
			}
		}
	})

	t.Run("cross-slot all or nothing", func(t *testing.T) {
		const policy = "cl-sliding-window-log"
		remaining := func(key string) float64 {
			code, body := c.call(t, 1, "GET", "/v1/ratelimit/keys/"+policy+"/"+key, "")
			if code != 200 {
				t.Fatalf("GET key %s = %d %v", key, code, body)
			}
			return body["remaining"].(float64)
		}
		multi := func(keys ...string) bool {
			items := make([]string, len(keys))
			for i, k := range keys {
				items[i] = fmt.Sprintf(`{"policy":%q,"key":%q}`, policy, k)
			}
			code, body := c.call(t, 0, "POST", "/v1/ratelimit/check", `{"checks":[`+strings.Join(items, ",")+`]}`)
			if code != 200 {
				t.Fatalf("multi-key check %v = %d %v", keys, code, body)
			}
			return body["allowed"] == true
		}
		// Exhaust the first key (lowest slot), then the last: either way
		// the refused check leaves the others uncharged.
		for _, full := range []int{0, 2} {
			keys := keysOnMasters(t, rc, fmt.Sprintf("m%d-", full))
			for range limit {
				if !multi(keys[full]) {
					t.Fatalf("filling %s was refused early", keys[full])
				}
			}
			before := []float64{remaining(keys[0]), remaining(keys[1]), remaining(keys[2])}
			if multi(keys[:]...) {
				t.Errorf("a check over %v with %s full was admitted", keys, keys[full])
			}
			for m, k := range keys {
				if m == full {
					continue
				}
				if got := remaining(k); got != before[m] {
					t.Errorf("after a refused cross-slot check, %s has %v remaining, want %v (nothing charged)", k, got, before[m])
				}
			}
		}
		// With room on every key, a cross-slot check charges every key.
		keys := keysOnMasters(t, rc, "ok-")
		if !multi(keys[:]...) {
			t.Errorf("a cross-slot check with room on %v was refused", keys)
		}
		for _, k := range keys {
			if got := remaining(k); got != limit-1 {
				t.Errorf("after an admitted cross-slot check, %s has %v remaining, want %d", k, got, limit-1)
			}
		}
	})

	t.Run("contended cross-slot checks never over-admit", func(t *testing.T) {
		const policy = "cl-fixed-window"
		keys := keysOnMasters(t, rc, "hot-")
		var mu sync.Mutex
		admitted := map[string]int{}
		var refused atomic.Int64
		var wg sync.WaitGroup
		for g := range 12 {
			wg.Go(func() {
				for i := range 10 {
					a, b := keys[(g+i)%3], keys[(g+i+1)%3]
					code, body, err := c.try(g%2, "POST", "/v1/ratelimit/check",
						fmt.Sprintf(`{"checks":[{"policy":%q,"key":%q},{"policy":%q,"key":%q}]}`, policy, a, policy, b))
					if err != nil || code != 200 {
						t.Errorf("contended check = %d %v %v", code, body, err)
						return
					}
					if body["allowed"] != true {
						refused.Add(1)
						continue
					}
					mu.Lock()
					admitted[a]++
					admitted[b]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for _, k := range keys {
			if admitted[k] > limit {
				t.Errorf("key %s admitted %d checks under a limit of %d", k, admitted[k], limit)
			}
		}
		t.Logf("120 contended 2-key checks: admitted per key %v, %d refused", admitted, refused.Load())
	})

	down, seen := watch.end()
	if seen == 0 {
		t.Fatal("no scrape of sluice_ratelimit_store_up succeeded")
	}
	if down > 0 {
		t.Errorf("sluice_ratelimit_store_up read 0 in %d of %d scrapes; a Cluster that answers is never down", down, seen)
	}
}

// TestRedisClusterMasterFailover kills one master of a 3-master cluster
// with a replica each while two nodes check keys on every master: no
// check fails (they fall open while the replica is promoted), checks then
// go on in Redis (the store is up again), and the window during which the
// nodes decided on their local fallback is measured.
func TestRedisClusterMasterFailover(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	rc := enginetest.StartRedisCluster(t, 3, 1)
	c := startNodes(t, 2, rc.URL())
	const policy = "failover"
	if code, body := c.call(t, 0, "PUT", "/v1/ratelimit/policies/"+policy,
		`{"algorithm":"token_bucket","limit":1000000,"period":"1s"}`); code != 201 {
		t.Fatalf("PUT policy = %d %v", code, body)
	}
	c.propagation(t, 0, time.Now(), "policy", func(code int, _ map[string]any) bool { return code == 200 },
		"GET", "/v1/ratelimit/keys/"+policy+"/probe")
	keys := keysOnMasters(t, rc, "f-")

	var (
		stop            = make(chan struct{})
		wg              sync.WaitGroup
		checks, failed  atomic.Int64
		firstDown, last atomic.Int64 // unix nanos: first scrape reading 0, last one
	)
	for g := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := c.nodes[g%2].try("POST", "/v1/ratelimit/check", "",
					fmt.Sprintf(`{"policy":%q,"key":%q}`, policy, keys[(g+i)%3]))
				checks.Add(1)
				if err != nil || code != 200 {
					failed.Add(1)
					t.Errorf("check during failover = %d %s %v", code, body, err)
				}
			}
		})
	}
	for _, n := range c.nodes {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond): // scrape interval
				}
				if storeUp(n.httpURL) == "0" {
					now := time.Now().UnixNano()
					firstDown.CompareAndSwap(0, now)
					last.Store(now)
				}
			}
		})
	}

	// Let checks run on a healthy cluster, then kill the first master.
	deadline := time.Now().Add(30 * time.Second)
	for checks.Load() < 200 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	killed := time.Now()
	rc.Masters()[0].Kill()
	// Wait until both nodes report the store up again after the kill, and
	// checks keep succeeding.
	recovered := false
	for time.Now().Before(killed.Add(60 * time.Second)) {
		time.Sleep(50 * time.Millisecond) // polling interval
		if time.Since(killed) > 3*time.Second && storeUp(c.nodes[0].httpURL) == "1" && storeUp(c.nodes[1].httpURL) == "1" {
			recovered = true
			break
		}
	}
	n := checks.Load()
	for checks.Load() < n+200 && time.Now().Before(killed.Add(90*time.Second)) {
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	close(stop)
	wg.Wait()
	if !recovered {
		t.Fatalf("the store was not up on both nodes within 60s of killing a master")
	}
	window := time.Duration(0)
	if f := firstDown.Load(); f != 0 {
		window = time.Duration(last.Load() - f)
	}
	t.Logf("master killed: %d checks, %d failed; fallback window (store_up 0) %v", checks.Load(), failed.Load(), window.Round(time.Millisecond))
}
