package topology

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// Timings of the harness. Generous: CI machines are small, and the test
// may run beside the whole -race suite.
const (
	nodeReadyTimeout = 90 * time.Second // from exec to /readyz 200
	nodeStopTimeout  = 20 * time.Second // from SIGTERM to SIGKILL at the end
	ackWait          = 2 * time.Second  // --notify-ack-wait of every node
	pollEvery        = 50 * time.Millisecond
)

// The rate limits the workload checks against: an HTTP fixed window and
// an Envoy rule (fixed windows of a minute, the Envoy default), both in
// the configuration files every node reads at start.
const (
	httpPolicy = "topo_fw"
	httpLimit  = 20
	httpPeriod = 5 * time.Second
	envoyKey   = "k"
	envoyLimit = 30
	envoyUnit  = time.Minute
)

// topology is everything one run starts: the engines, the Toxiproxy
// proxies in front of Redis and PostgreSQL, three `sluice serve` nodes, the
// HAProxy in front of them, and the receivers of notifications.
type topology struct {
	t   *testing.T
	out string // logs and results

	pg      *enginetest.Process
	pgProxy *toxiproxy.Proxy
	redis   *enginetest.RedisCluster
	// redisProxies[i] forwards to redis.Nodes[i]: the address that node
	// announces to clients.
	redisProxies []*toxiproxy.Proxy
	nats         *enginetest.NATSCluster
	nodes        []*node
	lb           *enginetest.Process
	grpcAddr     string // HAProxy's gRPC frontend
	hook         *hookReceiver
	smtp         *smtpPeer
}

// startTopology starts everything, in dependency order, and returns once
// HAProxy answers /readyz through every node.
func startTopology(t *testing.T, out string, h *History) *topology {
	t.Helper()
	bin := sluiceBinary(t)
	tp := &topology{t: t, out: out}
	tox := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())

	tp.pg = enginetest.StartPostgres(t)
	tp.pgProxy = newProxy(t, tox, "postgres", "127.0.0.1:0", tp.pg.Addr())

	// Each Redis node announces its proxy's address, so every client
	// (each Sluice node) reaches it through that proxy: a toxic on proxy
	// i is on every Sluice node's link to Redis node i at once. Toxiproxy
	// cannot tell Sluice nodes apart behind one proxy, and Redis Cluster
	// clients connect to the announced address whatever they were given,
	// so "one Sluice node's Redis link" is approximated by "every Sluice
	// node's link to one Redis node" (docs/reliability.md says so too).
	var mu sync.Mutex
	tp.redisProxies = make([]*toxiproxy.Proxy, 6)
	tp.redis = enginetest.StartRedisCluster(t, 3, 1, enginetest.Announce(func(i int, addr string) string {
		mu.Lock()
		defer mu.Unlock()
		listen := "127.0.0.1:0"
		if old := tp.redisProxies[i]; old != nil {
			old.Stop()
			listen = old.Listen
		}
		tp.redisProxies[i] = newProxy(t, tox, fmt.Sprintf("redis%d", i), listen, addr)
		return tp.redisProxies[i].Listen
	}))
	tp.nats = enginetest.StartNATSCluster(t, 3)
	tp.hook = newHookReceiver(t, h)
	tp.smtp = newSMTPPeer(t, h)

	cfgDir := t.TempDir()
	config := filepath.Join(cfgDir, "sluice.yaml")
	envoy := filepath.Join(cfgDir, "envoy.yaml")
	writeFile(t, config, fmt.Sprintf("ratelimit:\n  policies:\n    - {name: %s, algorithm: fixed_window, limit: %d, period: %s}\n",
		httpPolicy, httpLimit, httpPeriod))
	writeFile(t, envoy, fmt.Sprintf("domain: topo\ndescriptors:\n  - key: %s\n    rate_limit: {unit: minute, requests_per_unit: %d}\n",
		envoyKey, envoyLimit))

	var httpAddrs, grpcAddrs []string
	for range 3 {
		httpAddrs = append(httpAddrs, enginetest.SpareAddr(t))
		grpcAddrs = append(grpcAddrs, enginetest.SpareAddr(t))
	}
	tp.grpcAddr = enginetest.SpareAddr(t)
	tp.lb = enginetest.StartHAProxy(t, enginetest.HAProxy{
		Backends: httpAddrs, SendProxyV2: true, HealthCheck: "/readyz",
		GRPCAddr: tp.grpcAddr, GRPCBackends: grpcAddrs,
	})

	var secret [24]byte
	_, _ = rand.Read(secret[:])
	common := []string{
		"--log-format", "json", "--log-level", "warn",
		"--config", config, "--envoy-config", envoy,
		"--database-url", "postgres://postgres@" + tp.pgProxy.Listen + "/postgres?sslmode=disable",
		"--redis-url", tp.redis.URL(),
		"--nats-url", tp.nats.URL(), "--nats-replicas", "3",
		"--proxy-protocol", "--trusted-proxies", "127.0.0.1",
		"--notify-ack-wait", ackWait.String(), "--notify-marketing-cap", "0",
		"--ratelimit-nodes", "3",
		"--smtp-addr", tp.smtp.addr, "--smtp-tls", "none", "--smtp-from", "topo@example.test",
		"--allow-private-targets", "--webhook-secret", "whsec_" + base64.StdEncoding.EncodeToString(secret[:]),
		"--links-base-url", tp.lb.URL(),
	}
	for i := range 3 {
		tp.nodes = append(tp.nodes, &node{
			name: fmt.Sprintf("node%d", i), bin: bin, httpAddr: httpAddrs[i],
			log: filepath.Join(out, fmt.Sprintf("node%d.log", i)),
			args: append([]string{"serve", "--http-addr", httpAddrs[i], "--grpc-addr", grpcAddrs[i],
				"--data-dir", t.TempDir()}, common...),
		})
	}
	t.Cleanup(func() {
		for _, n := range tp.nodes {
			n.stop()
		}
	})
	// One after another: started at once on a fresh 3-server cluster,
	// the three nodes' R3 stream creations all time out ("ensure stream
	// NOTIFY_EMAIL_CRITICAL: context deadline exceeded") and every node
	// exits; reported with the run. A rolling deploy starts nodes in turn.
	for _, n := range tp.nodes {
		if err := n.start(); err != nil {
			t.Fatalf("start nodes: %v", err)
		}
	}
	tp.waitBalanced()
	return tp
}

// waitBalanced polls HAProxy's statistics until every HTTP and gRPC
// server is UP, so every node is in rotation before the workload starts.
func (tp *topology) waitBalanced() {
	tp.t.Helper()
	deadline := time.Now().Add(nodeReadyTimeout)
	client := &http.Client{Timeout: 5 * time.Second}
	want := 2 * len(tp.nodes)
	var up int
	for {
		up = 0
		if resp, err := client.Get(tp.lb.URL() + "/haproxy-stats;csv"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(string(b), "\n") {
				f := strings.Split(line, ",")
				if len(f) > 17 && (f[0] == "be" || f[0] == "be_grpc") && f[1] != "BACKEND" && f[17] == "UP" {
					up++
				}
			}
		}
		if up == want {
			return
		}
		if time.Now().After(deadline) {
			tp.t.Fatalf("HAProxy %s: %d of %d servers UP after %s", tp.lb.URL(), up, want, nodeReadyTimeout)
		}
		time.Sleep(pollEvery) // polling interval
	}
}

// newProxy starts a Toxiproxy proxy from listen to upstream, stopped when
// the test ends.
func newProxy(t *testing.T, srv *toxiproxy.ApiServer, name, listen, upstream string) *toxiproxy.Proxy {
	t.Helper()
	p := toxiproxy.NewProxy(srv, name, listen, upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy %s on %s: %v", name, listen, err)
	}
	t.Cleanup(p.Stop)
	return p
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sluiceBinary builds cmd/sluice once per test run.
func sluiceBinary(t *testing.T) string { return enginetest.SluiceBinary(t) }

// node is one `sluice serve` process on fixed ports (HAProxy's backends),
// logging to a file kept with the run's results. Its methods are safe for
// concurrent use; they return errors rather than fail the test, so that a
// fault's goroutine may call them.
type node struct {
	name, bin, httpAddr, log string
	args                     []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// start runs the node and waits until its /readyz answers 200 (asked
// directly, without a PROXY header, as HAProxy's health check does).
func (n *node) start() error { return n.launch("/readyz") }

// restart runs the stopped node again and waits until it is alive
// (/healthz), not until it is ready: a fault overlapping the restart may
// keep it unready, and HAProxy's health check brings it back into
// rotation once it is.
func (n *node) restart() error { return n.launch("/healthz") }

func (n *node) launch(probe string) error {
	n.mu.Lock()
	if n.cmd != nil {
		n.mu.Unlock()
		return fmt.Errorf("%s: start while running", n.name)
	}
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	cmd := exec.Command(n.bin, n.args...)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	fmt.Fprintf(logf, "--- start %s %s\n", n.name, time.Now().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		logf.Close()
		n.mu.Unlock()
		return fmt.Errorf("%s: %w", n.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), nodeReadyTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Get("http://" + n.httpAddr + probe)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited before it was ready (%s); log %s", n.name, cmd.ProcessState, n.log)
		case <-ctx.Done():
			return fmt.Errorf("%s: %s not 200 within %s (last: %v); log %s", n.name, probe, nodeReadyTimeout, err, n.log)
		case <-time.After(pollEvery):
		}
	}
}

// kill ends the node at once with SIGKILL, as a crash would, and waits
// for it to exit.
func (n *node) kill() { n.end(syscall.SIGKILL) }

// stop ends the node gracefully (SIGTERM, SIGKILL after 20 s); stopping a
// stopped node does nothing.
func (n *node) stop() { n.end(syscall.SIGTERM) }

func (n *node) end(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGCONT) // a stopped node cannot handle SIGTERM
	_ = syscall.Kill(-n.cmd.Process.Pid, sig)
	select {
	case <-n.done:
	case <-time.After(nodeStopTimeout):
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.done
	}
	n.cmd = nil
}

// signal sends sig (SIGSTOP, SIGCONT) to the running node.
func (n *node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%s: not running", n.name)
	}
	return syscall.Kill(-n.cmd.Process.Pid, sig)
}

// cleanEnv is the test's environment without SLUICE_ settings, so that
// only the flags configure a node.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			env = append(env, kv)
		}
	}
	return env
}

// atoi parses a decimal number, 0 if it is not one.
func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
