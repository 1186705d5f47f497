package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// startQuotaNode runs `sluice serve` with flags on spare ports and returns
// its gRPC address and a kill function; the process is killed when the test
// ends.
func startQuotaNode(t *testing.T, flags ...string) (grpcAddr string, kill func()) {
	t.Helper()
	args := append([]string{"serve", "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--log-format", "json"}, flags...)
	cmd := exec.Command(enginetest.SluiceBinary(t), args...)
	cmd.Env = append(os.Environ(), "SLUICE_DATABASE_URL=", "SLUICE_NATS_URL=", "SLUICE_REDIS_URL=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	addr := make(chan string, 1)
	var tail enginetest.LogBuffer
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = tail.Write(append(line, '\n'))
			var e struct{ Msg, GRPC string }
			if json.Unmarshal(line, &e) == nil && e.Msg == "sluice serving" {
				select {
				case addr <- e.GRPC:
				default:
				}
			}
		}
		_ = cmd.Wait()
	}()
	kill = func() { _ = cmd.Process.Kill(); <-exited }
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			t.Logf("node log:\n%s", tail.String())
		}
	})
	select {
	case a := <-addr:
		return a, kill
	case <-exited:
		t.Fatalf("sluice serve exited before serving:\n%s", tail.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("sluice serve did not start within 90s:\n%s", tail.String())
	}
	return "", nil
}

// TestQuotaNodeKilled: two `sluice serve` processes on one Redis divide a
// bucket's 100 requests a minute between an Envoy on each. Node A is
// killed with SIGKILL; its Envoy's stream ends, and the Envoy reconnects to
// B (as through a load balancer). Its first answer there is given at once,
// and, while the dead node's row still counts, the shares in force stay
// within the limit; once the row expires (two report intervals) the Envoy
// gets its full share back.
func TestQuotaNodeKilled(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	var tag [4]byte
	_, _ = rand.Read(tag[:])
	domain := "rlqskill" + hex.EncodeToString(tag[:]) // its Redis keys are the test's own
	dir := t.TempDir()
	rules := "domain: " + domain + "\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--redis-url", enginetest.RedisURL(t), "--ratelimit-nodes", "2", "--envoy-config", dir}
	addrA, killA := startQuotaNode(t, flags...)
	addrB, _ := startQuotaNode(t, flags...)

	bucket := map[string]string{"tenant": "acme"}
	const interval = time.Second // the Envoys' reporting_interval
	// inForce follows each Envoy's assignment in force: the last answer or
	// push it received.
	inForce := map[*quotaStream]uint64{}
	var e1, e2 *quotaStream
	share := func(q *quotaStream, allowed uint64) (uint64, error) {
		t.Helper()
		for _, p := range []*quotaStream{e1, e2} { // pushes from the last report land first
			if r := p.settle(100 * time.Millisecond); r != nil {
				inForce[p] = perMinute(r)
			}
		}
		r, err := q.report(domain, bucket, allowed, interval)
		if err != nil {
			return 0, err
		}
		if ttl := r.GetBucketAction()[0].GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration(); ttl != 3*interval {
			t.Errorf("assignment TTL = %v, want 3 report intervals", ttl)
		}
		inForce[q] = perMinute(r)
		return perMinute(r), nil
	}
	must := func(q *quotaStream, allowed uint64) uint64 {
		t.Helper()
		s, err := share(q, allowed)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	e1, e2 = openQuota(t, addrA), openQuota(t, addrB)
	must(e1, 0)
	if got := must(e2, 0); got != 50 {
		t.Fatalf("second Envoy, on the other node = %d, want 50 (the table is shared)", got)
	}
	s1 := must(e1, 90) // 5400 a minute
	s2 := must(e2, 0)
	if s1 < 90 || s1+s2 > 100 {
		t.Fatalf("busy e1 on A = %d, idle e2 on B = %d; want e1 ≥ 90 and a sum ≤ 100", s1, s2)
	}
	_ = s2

	killA()
	killed := time.Now()
	if _, err := e1.next(10 * time.Second); err == nil {
		t.Fatal("e1's stream to the killed node gave a response, want its end")
	}
	e1 = openQuota(t, addrB) // the load balancer sends the Envoy to B
	s1 = must(e1, 90)
	settleAll := func() {
		for _, p := range []*quotaStream{e1, e2} {
			if r := p.settle(200 * time.Millisecond); r != nil {
				inForce[p] = perMinute(r)
			}
		}
	}
	settleAll()
	if inForce[e1]+inForce[e2] > 100 {
		t.Errorf("e1's first share on B = %d beside e2's %d in force: over the limit", inForce[e1], inForce[e2])
	}
	if s1 >= 90 {
		t.Errorf("e1's first share on B = %d, want less while its dead row counts", s1)
	}
	// Both Envoys keep reporting every interval, as they would.
	enginetest.EventuallyNil(t, 10*time.Second, "e1's full share after the dead node's row expired", func() error {
		var err error
		if s2, err = share(e2, 0); err != nil {
			return err
		}
		if s1, err = share(e1, 90); err != nil {
			return err
		}
		return enginetest.State(s1 >= 90, "e1 = %d", s1)
	})
	if d := time.Since(killed); d > 2*interval+5*time.Second {
		t.Errorf("the dead node's share came back after %v, want about two report intervals", d)
	}
	settleAll()
	if inForce[e1]+inForce[e2] > 100 {
		t.Errorf("e1 = %d beside e2's %d in force, over the limit", inForce[e1], inForce[e2])
	}
}
