package main

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/rlqs"
)

// quotaStream is one Envoy's rate limit quota stream to a node.
type quotaStream struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
	resps  chan *rlqspb.RateLimitQuotaResponse
	errs   chan error
}

func openQuota(t *testing.T, addr string) *quotaStream {
	t.Helper()
	conn := dialGRPC(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	q := &quotaStream{t: t, stream: s, resps: make(chan *rlqspb.RateLimitQuotaResponse, 16), errs: make(chan error, 1)}
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				q.errs <- err
				return
			}
			q.resps <- r
		}
	}()
	return q
}

// report sends one bucket's usage and returns the response, or the
// stream's error.
func (q *quotaStream) report(domain string, bucket map[string]string, allowed uint64, elapsed time.Duration) (*rlqspb.RateLimitQuotaResponse, error) {
	q.t.Helper()
	err := q.stream.Send(&rlqspb.RateLimitQuotaUsageReports{Domain: domain,
		BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqspb.BucketId{Bucket: bucket}, TimeElapsed: durationpb.New(elapsed), NumRequestsAllowed: allowed}}})
	if err != nil {
		return nil, err
	}
	return q.next(10 * time.Second)
}

func (q *quotaStream) next(within time.Duration) (*rlqspb.RateLimitQuotaResponse, error) {
	q.t.Helper()
	select {
	case r := <-q.resps:
		return r, nil
	case err := <-q.errs:
		return nil, err
	case <-time.After(within):
		q.t.Fatalf("no rate limit quota response within %v", within)
	}
	return nil, nil
}

// settle waits d for pushes and returns the last response received
// (push or answer), nil when none came.
func (q *quotaStream) settle(d time.Duration) *rlqspb.RateLimitQuotaResponse {
	var last *rlqspb.RateLimitQuotaResponse
	deadline := time.After(d)
	for {
		select {
		case r := <-q.resps:
			last = r
		case <-deadline:
			return last
		}
	}
}

func perMinute(r *rlqspb.RateLimitQuotaResponse) uint64 {
	return r.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetRequestsPerTimeUnit().GetRequestsPerTimeUnit()
}

// TestServeRateLimitQuotaService: the node's gRPC listener serves RLQS
// beside RLS (health SERVING for it, reflection lists it), assigns a
// bucket its limit from --envoy-config, and abandons the bucket when an
// edit of the file removes its rule.
func TestServeRateLimitQuotaService(t *testing.T) {
	t.Parallel()
	dir, file := envoyConfig(t, "120")
	cfg := testConfig(t)
	cfg.EnvoyConfig = dir
	n := startNode(t, cfg)
	conn := dialGRPC(t, n.grpcAddr)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: rlqs.ServiceName})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health of %s = %v, %v; want SERVING", rlqs.ServiceName, h, err)
	}
	rs, err := reflectpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	lr, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range lr.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, rlqs.ServiceName) || !slices.Contains(names, "envoy.service.ratelimit.v3.RateLimitService") {
		t.Errorf("reflection lists %v, want both Envoy services", names)
	}

	q := openQuota(t, n.grpcAddr)
	bucket := map[string]string{"remote_address": "203.0.113.9"}
	r, err := q.report("edge", bucket, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := perMinute(r); got != 120 {
		t.Errorf("the only Envoy's share = %d per minute (%v), want 120", got, r)
	}
	if err := os.WriteFile(file, []byte("domain: edge\ndescriptors:\n  - key: other\n    rate_limit: {unlimited: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = q.next(10 * time.Second)
	if err != nil || len(r.GetBucketAction()) != 1 || r.GetBucketAction()[0].GetAbandonAction() == nil {
		t.Errorf("pushed after the rule's removal = %v, %v; want an abandon action", r, err)
	}
}

// TestQuotaStreamsEndOnShutdown: open quota streams, which never end by
// themselves, do not hold a stopping node until --shutdown-timeout: they
// end with UNAVAILABLE, and the Envoys reconnect elsewhere.
func TestQuotaStreamsEndOnShutdown(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ShutdownTimeout = 30 * time.Second
	r := runNode(t, cfg, slog.New(slog.DiscardHandler))
	q := openQuota(t, r.GRPC)
	if _, err := q.report("edge", map[string]string{"remote_address": "203.0.113.9"}, 0, 0); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	if err := r.stop(t, cfg.ShutdownTimeout); err != nil {
		t.Errorf("serve returned %v", err)
	}
	if d := time.Since(stopped); d > 10*time.Second {
		t.Errorf("serve took %v to stop with a quota stream open, want it not to wait on the stream", d)
	}
	if _, err := q.next(5 * time.Second); grpcstatus.Code(err) != codes.Unavailable {
		t.Errorf("the stream ended with %v, want UNAVAILABLE", err)
	}
}
