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
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func envoyYAML(limit string) string {
	return "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: " + limit + "}\n"
}

func TestServeEnvoyRateLimitService(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	if err := os.WriteFile(file, []byte(envoyYAML("2")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.EnvoyConfig = dir
	n := startNode(t, cfg)
	conn, err := grpc.NewClient(n.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
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
	eventually(t, 10*time.Second, "the edited limit in force", func() (bool, string) {
		r := check("198.51.100.1")
		return r.Statuses[0].CurrentLimit.GetRequestsPerUnit() == 5, r.String()
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
	err := serve(ctx, cfg, slog.New(slog.DiscardHandler), func(string, string) { t.Error("serve started listening") })
	if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "requests_per_unit") {
		t.Errorf("serve = %v, want an error naming %s and the bad key", err, file)
	}
}
