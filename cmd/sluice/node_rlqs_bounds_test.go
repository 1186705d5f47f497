package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// TestQuotaReportPastCountsKeepsNode: one rate limit quota report with
// num_requests_allowed = 2^64-1 on a shadow-mode rule used to panic a
// counter and kill the node. Now the stream ends with INVALID_ARGUMENT
// (its own doing, not a recovered panic) and the node keeps serving RLQS.
func TestQuotaReportPastCountsKeepsNode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rules := "domain: edge\ndescriptors:\n  - key: remote_address\n    shadow_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.EnvoyConfig = dir
	n := startNode(t, cfg)
	bucket := map[string]string{"remote_address": "203.0.113.9"}

	q := openQuota(t, n.grpcAddr)
	if _, err := q.report("edge", bucket, 0, 0); err != nil {
		t.Fatal(err)
	}
	_, err := q.report("edge", bucket, math.MaxUint64, 10*time.Second)
	if grpcstatus.Code(err) != codes.InvalidArgument || !strings.Contains(grpcstatus.Convert(err).Message(), "2^53") {
		t.Fatalf("a report of 2^64-1 requests: %v, want INVALID_ARGUMENT naming the bound of 2^53", err)
	}

	again := openQuota(t, n.grpcAddr)
	r, err := again.report("edge", bucket, 5, 10*time.Second)
	if err != nil {
		t.Fatalf("the node after the refused report: %v", err)
	}
	if got := r.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetBlanketRule().String(); got != "ALLOW_ALL" {
		t.Errorf("the shadow rule's assignment = %s, want ALLOW_ALL", got)
	}
}
