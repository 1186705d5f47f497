package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// testNode is a `sluice serve` running in this test process.
type testNode struct {
	httpURL, grpcAddr string
	gatewayAddr       string // empty without a gateway
}

// testConfig is the embedded default configuration on spare ports and a
// private data dir.
func testConfig(t *testing.T) config.Config {
	cfg := config.Default()
	cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

// startNode runs serve until the test ends, then checks it stopped cleanly.
func startNode(t *testing.T, cfg config.Config) *testNode {
	t.Helper()
	return startNodeLogging(t, cfg, slog.New(slog.DiscardHandler))
}

// startTwoNodes runs two nodes of cfg sharing a fresh PostgreSQL schema
// and a NATS prefix (each with its own data directory), as startNode.
func startTwoNodes(t *testing.T, cfg config.Config) (a, b *testNode) {
	t.Helper()
	cfg.DatabaseURL = enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	cfg.NATSURL = enginetest.NATSURL(t)
	cfg.NATSPrefix = natsPrefix(t, cfg.NATSURL)
	a = startNode(t, cfg)
	cfg.DataDir = t.TempDir()
	return a, startNode(t, cfg)
}

// startNodeLogging is startNode with the node's logs going to log.
func startNodeLogging(t *testing.T, cfg config.Config, log *slog.Logger) *testNode {
	t.Helper()
	r := runNode(t, cfg, log)
	t.Cleanup(func() {
		if err := r.stop(t, 2*time.Minute); err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
	})
	return &testNode{httpURL: "http://" + r.HTTP, grpcAddr: r.GRPC, gatewayAddr: r.Gateway}
}

// dialGRPC dials a node's plaintext gRPC listener; the connection closes
// when the test ends.
func dialGRPC(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// runningNode is a node serving in this test process until the test stops
// it, for tests of how a node stops.
type runningNode struct {
	bound  // where it listens
	cancel context.CancelFunc
	done   chan error // serve's return
}

// runNode runs serve with cfg, its logs going to log, and returns once it
// listens; the test stops it with stop.
func runNode(t *testing.T, cfg config.Config, log *slog.Logger) *runningNode {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a test that fails before stop leaves no node running
	r := &runningNode{cancel: cancel, done: make(chan error, 1)}
	addrs := make(chan bound, 1)
	go func() { r.done <- serve(ctx, cfg, log, func(b bound) { addrs <- b }) }()
	select {
	case r.bound = <-addrs:
	case err := <-r.done:
		cancel()
		t.Fatalf("serve ended before listening: %v", err)
	case <-time.After(2 * time.Minute): // a loaded machine running the race detector
		cancel()
		t.Fatal("serve did not start within 2m")
	}
	return r
}

// stop ends the node's context and returns what serve returned; the test
// fails if serve has not returned within the given time.
func (r *runningNode) stop(t *testing.T, within time.Duration) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(within):
		t.Fatalf("serve did not stop within %v", within)
		return nil
	}
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := apiClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func TestServeEmbeddedDefaults(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))

	if code, body := get(t, n.httpURL+"/healthz"); code != 200 || !strings.Contains(string(body), `"ok"`) {
		t.Errorf("/healthz = %d %s", code, body)
	}
	code, body := get(t, n.httpURL+"/readyz")
	if code != 200 {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	var ready struct {
		Checks []struct{ Name, Status string }
	}
	if err := json.Unmarshal(body, &ready); err != nil || len(ready.Checks) != 2 {
		t.Errorf("/readyz body %s: want database and nats checks (%v)", body, err)
	}
	code, body = get(t, n.httpURL+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics = %d", code)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.HasPrefix(line, "sluice_") {
			t.Errorf("metric without the sluice_ prefix: %s", line)
			break
		}
	}
	for _, want := range []string{"sluice_http_requests_total", "sluice_go_goroutines", "sluice_process_resident_memory_bytes"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	code, body = get(t, n.httpURL+"/openapi.json")
	var doc map[string]any
	if code != 200 || json.Unmarshal(body, &doc) != nil || doc["openapi"] != "3.1.0" {
		t.Errorf("/openapi.json = %d, not an OpenAPI 3.1 document", code)
	}

	conn := dialGRPC(t, n.grpcAddr)
	resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health = %v, %v; want SERVING", resp, err)
	}
}

// TestReadyzFollowsEngines stops and restarts private Redis and NATS
// servers under a running node: /readyz names the engine that is gone and
// turns ready again on its own when it returns.
func TestReadyzFollowsEngines(t *testing.T) {
	t.Parallel()
	redis := enginetest.StartRedis(t)
	nats := enginetest.StartNATS(t)
	cfg := testConfig(t)
	cfg.RedisURL, cfg.NATSURL = redis.URL(), nats.URL()
	n := startNode(t, cfg)

	readyz := func(wantCode int, wantNamed string) func() error {
		return func() error {
			code, body := get(t, n.httpURL+"/readyz")
			ok := code == wantCode
			if ok && wantNamed != "" {
				var p struct{ Detail string }
				_ = json.Unmarshal(body, &p)
				ok = strings.Contains(p.Detail, wantNamed+":")
			}
			return enginetest.State(ok, "%s", string(body))
		}
	}
	enginetest.EventuallyNil(t, 10*time.Second, "ready at start", readyz(200, ""))
	for _, engine := range []struct {
		name string
		proc *enginetest.Process
	}{{"redis", redis}, {"nats", nats}} {
		engine.proc.Stop()
		enginetest.EventuallyNil(t, 15*time.Second, engine.name+" down: 503 naming it", readyz(503, engine.name))
		engine.proc.Start()
		enginetest.EventuallyNil(t, 15*time.Second, engine.name+" back: ready again", readyz(200, ""))
	}
}

// TestServeExternalEngines runs against the machine's PostgreSQL, Redis
// and NATS (a schema of the test's own in Postgres).
func TestServeExternalEngines(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DatabaseURL = enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	cfg.RedisURL = enginetest.RedisURL(t)
	cfg.NATSURL = enginetest.NATSURL(t)
	cfg.NATSPrefix = natsPrefix(t, cfg.NATSURL)
	n := startNode(t, cfg)
	code, body := get(t, n.httpURL+"/readyz")
	if code != 200 {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	for _, name := range []string{"database", "nats", "redis"} {
		if !strings.Contains(string(body), `"name":"`+name+`"`) {
			t.Errorf("/readyz does not check %s: %s", name, body)
		}
	}
}
