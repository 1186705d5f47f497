package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sluicehq/sluice/internal/enginetest"
)

func envoyYAML(limit string) string {
	return "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: " + limit + "}\n"
}

// envoyConfig writes envoyYAML(limit) to edge.yaml in a new dir, for
// --envoy-config, and returns the dir and the file.
func envoyConfig(t *testing.T, limit string) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	file = filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(file, []byte(envoyYAML(limit)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func TestServeEnvoyRateLimitService(t *testing.T) {
	t.Parallel()
	dir, file := envoyConfig(t, "2")
	cfg := testConfig(t)
	cfg.EnvoyConfig = dir
	n := startNode(t, cfg)
	conn := dialGRPC(t, n.grpcAddr)
	client := rlspb.NewRateLimitServiceClient(conn)
	check := func(ip string) *rlspb.RateLimitResponse {
		t.Helper()
		resp, err := client.ShouldRateLimit(t.Context(), &rlspb.RateLimitRequest{Domain: "edge",
			Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "remote_address", Value: ip}}}}})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp
	}
	var codes []string
	for range 3 {
		codes = append(codes, check("203.0.113.9").OverallCode.String())
	}
	if got := strings.Join(codes, " "); got != "OK OK OVER_LIMIT" {
		t.Errorf("three calls at 2 per minute = %s, want OK OK OVER_LIMIT", got)
	}

	if err := os.WriteFile(file, []byte(envoyYAML("5")), 0o644); err != nil {
		t.Fatal(err)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "the edited limit in force", func() error {
		r := check("198.51.100.1")
		return enginetest.State(r.Statuses[0].CurrentLimit.GetRequestsPerUnit() == 5, "%s", r.String())
	})
}

func TestServeRefusesABadEnvoyConfig(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(file, []byte(envoyYAML("lots")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.EnvoyConfig = file
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := serve(ctx, cfg, slog.New(slog.DiscardHandler), func(bound) { t.Error("serve started listening") })
	if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "requests_per_unit") {
		t.Errorf("serve = %v, want an error naming %s and the bad key", err, file)
	}
}

// TestEnvoyHonoursBlocksOfEveryNode runs two nodes on one PostgreSQL,
// Redis and NATS: a block of remote_address=203.0.113.9 in domain edge,
// made through B's HTTP API, makes A's Envoy service answer OVER_LIMIT for
// that entry in edge at once (the waits allow 20 s, for a loaded machine)
// and OK in another domain; a block without
// domain refuses it in every domain, configured or not; lifting them lets
// the requests through again.
func TestEnvoyHonoursBlocksOfEveryNode(t *testing.T) {
	t.Parallel()
	dir, _ := envoyConfig(t, "100")
	cfg := sharedEngines(t)
	cfg.Ratelimit.RefreshInterval = time.Hour // only the push path can make it in time
	cfg.EnvoyConfig = dir
	a := startNode(t, cfg)
	cfg.DataDir = t.TempDir()
	b := startNode(t, cfg)

	conn := dialGRPC(t, a.grpcAddr)
	client := rlspb.NewRateLimitServiceClient(conn)
	code := func(domain string) string {
		t.Helper()
		resp, err := client.ShouldRateLimit(t.Context(), &rlspb.RateLimitRequest{Domain: domain,
			Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{
				{Key: "remote_address", Value: "203.0.113.9"}}}}})
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		return resp.OverallCode.String()
	}
	is := func(domain, want string) func() error {
		return func() error { got := code(domain); return enginetest.State(got == want, "%s", domain+": "+got) }
	}
	if got := code("edge") + " " + code("web"); got != "OK OK" {
		t.Fatalf("before any block, edge and web = %s, want OK OK", got)
	}

	start := time.Now()
	if code, body := send(t, "POST", b.httpURL+"/v1/ratelimit/blocks",
		`{"key":"remote_address=203.0.113.9","domain":"edge","duration":"10m","reason":"scraper"}`); code != 201 || body["domain"] != "edge" {
		t.Fatalf("POST block on B = %d %v, want 201 with the domain", code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "A's Envoy service refuses in edge what B blocked", is("edge", "OVER_LIMIT"))
	t.Logf("block in edge made on B enforced by A's Envoy service after %v", time.Since(start))
	if got := code("web"); got != "OK" {
		t.Errorf("domain web with the entry blocked in edge = %s, want OK", got)
	}
	_, list := send(t, "GET", a.httpURL+"/v1/ratelimit/blocks", "")
	if items, _ := list["items"].([]any); len(items) != 1 || items[0].(map[string]any)["domain"] != "edge" {
		t.Errorf("GET blocks on A = %v, want the block with its domain", list)
	}

	start = time.Now()
	if code, body := send(t, "POST", b.httpURL+"/v1/ratelimit/blocks",
		`{"key":"remote_address=203.0.113.9","duration":"10m","reason":"everywhere"}`); code != 201 {
		t.Fatalf("POST block without domain on B = %d %v", code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "A's Envoy service refuses in every domain", is("web", "OVER_LIMIT"))
	t.Logf("block without domain made on B enforced by A's Envoy service after %v", time.Since(start))

	if code, body := send(t, "DELETE", b.httpURL+"/v1/ratelimit/blocks/remote_address=203.0.113.9", ""); code != 204 {
		t.Fatalf("DELETE blocks on B = %d %v", code, body)
	}
	enginetest.EventuallyNil(t, 20*time.Second, "A's Envoy service admits in edge once B lifted the blocks", is("edge", "OK"))
	if got := code("web"); got != "OK" {
		t.Errorf("domain web after the blocks were lifted = %s, want OK", got)
	}
}
