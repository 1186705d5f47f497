package rlqs_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/rlqs"
	"github.com/sluicehq/sluice/ratelimit"
)

// The cost of RLQS against RLS, for docs/benchmarks.md: RLQS costs Sluice
// one report per Envoy per interval, however many requests the Envoy
// decides meanwhile; RLS costs one ShouldRateLimit call per request. Both
// run over real gRPC (bufconn), client and server in this process, and
// report the process's CPU per operation.

const benchRule = `
domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 1000000}
`

// cpuNanos is the process's user and system CPU time.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func benchConn(b *testing.B, register func(*grpc.Server)) *grpc.ClientConn {
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	register(gs)
	go gs.Serve(lis) //nolint:errcheck // ends with Stop
	b.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

// BenchmarkQuotaReports: each of 64 streams (Envoys) reports the same
// buckets (tenants) and waits for its assignments; an op is one report
// (with the pushes it causes to the others).
// cpu-ns/bucket is what one bucket of one Envoy costs per interval.
func BenchmarkQuotaReports(b *testing.B) {
	for _, buckets := range []int{1, 10, 100} {
		b.Run(strconv.Itoa(buckets)+"_buckets", func(b *testing.B) {
			cfg, err := envoyrls.Parse(map[string][]byte{"api.yaml": []byte(benchRule)})
			if err != nil {
				b.Fatal(err)
			}
			srv := rlqs.New(cfg, rlqs.Options{Registerer: prometheus.NewRegistry()})
			b.Cleanup(srv.Close)
			conn := benchConn(b, func(gs *grpc.Server) { srv.Register(gs) })
			usages := make([]*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, buckets)
			for i := range usages {
				usages[i] = &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
					BucketId:           &rlqspb.BucketId{Bucket: map[string]string{"tenant": "t" + strconv.Itoa(i)}},
					TimeElapsed:        durationpb.New(time.Second),
					NumRequestsAllowed: 1000,
				}
			}
			var failed atomic.Value
			var pushes atomic.Int64
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ReportAllocs()
			cpu := cpuNanos()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				s, err := rlqspb.NewRateLimitQuotaServiceClient(conn).StreamRateLimitQuotas(ctx)
				if err != nil {
					failed.Store(err)
					return
				}
				first := true
				for pb.Next() {
					m := &rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: usages}
					if first {
						m.Domain, first = "api", false
					}
					if err := s.Send(m); err != nil {
						failed.Store(err)
						return
					}
					// The answer has an action per bucket; pushes of new
					// shares (another Envoy joined) may come first.
					for {
						r, err := s.Recv()
						if err != nil {
							failed.Store(err)
							return
						}
						if len(r.GetBucketAction()) == buckets {
							break
						}
						pushes.Add(1)
					}
				}
			})
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			perOp := float64(cpuNanos()-cpu) / float64(b.N)
			b.ReportMetric(perOp, "cpu-ns/op")
			b.ReportMetric(perOp/float64(buckets), "cpu-ns/bucket")
			b.ReportMetric(float64(pushes.Load())/float64(b.N), "pushes/op")
		})
	}
}

// BenchmarkRLSChecks is the same rule asked over RLS, as an Envoy with
// the ratelimit filter asks it: one call per request, 64 callers.
func BenchmarkRLSChecks(b *testing.B) {
	cfg, err := envoyrls.Parse(map[string][]byte{"api.yaml": []byte(benchRule)})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := envoyrls.New(cfg, envoyrls.Options{Store: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}),
		Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	conn := benchConn(b, func(gs *grpc.Server) { rlspb.RegisterRateLimitServiceServer(gs, srv) })
	client := rlspb.NewRateLimitServiceClient(conn)
	var failed atomic.Value
	var next atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	cpu := cpuNanos()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			req := &rlspb.RateLimitRequest{Domain: "api", Descriptors: []*commonpb.RateLimitDescriptor{{
				Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "tenant", Value: "t" + strconv.Itoa(int(next.Add(1)%100))}}}}}
			r, err := client.ShouldRateLimit(ctx, req)
			if err == nil && r.OverallCode != rlspb.RateLimitResponse_OK {
				err = fmt.Errorf("overall code %v", r.OverallCode)
			}
			if err != nil {
				failed.Store(err)
				return
			}
		}
	})
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpuNanos()-cpu)/float64(b.N), "cpu-ns/op")
}
