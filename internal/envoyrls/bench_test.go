package envoyrls_test

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/ratelimit"
)

const benchYAML = `
domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000000000, algorithm: token_bucket}
    descriptors:
      - key: path
        rate_limit: {unit: hour, requests_per_unit: 1000000000, algorithm: gcra}
`

// benchKeys are distinct clients, so the store holds many keys.
const benchKeys = 1024

func benchRequests(n int) []*rlspb.RateLimitRequest {
	out := make([]*rlspb.RateLimitRequest, benchKeys)
	for i := range out {
		id := strconv.Itoa(i)
		ds := []*commonpb.RateLimitDescriptor{desc("remote_address", "10.0.0."+id)}
		if n == 3 {
			ds = append(ds, desc("user", "u"+id), desc("user", "u"+id, "path", "/api/items"))
		}
		out[i] = req("bench", ds...)
	}
	return out
}

// BenchmarkShouldRateLimit calls the service in process (no gRPC), with
// one and with three descriptors per request, on the memory store.
func BenchmarkShouldRateLimit(b *testing.B) {
	cfg, err := envoyrls.Parse(map[string][]byte{"bench.yaml": []byte(benchYAML)})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			s, err := envoyrls.New(cfg, envoyrls.Options{Store: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})})
			if err != nil {
				b.Fatal(err)
			}
			reqs := benchRequests(n)
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					resp, err := s.ShouldRateLimit(ctx, reqs[i%benchKeys])
					if err != nil || resp.OverallCode != rlspb.RateLimitResponse_OK {
						b.Fatalf("ShouldRateLimit = %v, %v", resp, err)
					}
					i++
				}
			})
		})
	}
}

// BenchmarkPlainChecks is the floor under BenchmarkShouldRateLimit: the
// same checks straight on the memory store, keys prepared in advance.
func BenchmarkPlainChecks(b *testing.B) {
	policies := []ratelimit.Policy{
		{Name: "ip", Algorithm: ratelimit.FixedWindow, Limit: 1e9, Period: 1e9},
		{Name: "user", Algorithm: ratelimit.TokenBucket, Limit: 1e9, Period: 60e9},
		{Name: "path", Algorithm: ratelimit.GCRA, Limit: 1e9, Period: 3600e9},
	}
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
			checks := make([][]ratelimit.Check, benchKeys)
			for i := range checks {
				id := strconv.Itoa(i)
				for j := range n {
					checks[i] = append(checks[i], ratelimit.Check{Policy: &policies[j], Key: "bench_k_" + id + "_" + strconv.Itoa(j), Cost: 1})
				}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					c := checks[i%benchKeys]
					var ok bool
					var err error
					if len(c) == 1 {
						var d ratelimit.Decision
						d, err = store.Allow(ctx, c[0].Policy, c[0].Key, 1)
						ok = d.Allowed
					} else {
						ok, _, err = ratelimit.AllowAll(ctx, store, c)
					}
					if err != nil || !ok {
						b.Fatalf("check = %v, %v", ok, err)
					}
					i++
				}
			})
		})
	}
}

// BenchmarkShouldRateLimitGRPC goes through the real generated client and
// a gRPC server over an in-process connection, 64 callers at once.
func BenchmarkShouldRateLimitGRPC(b *testing.B) {
	cfg, err := envoyrls.Parse(map[string][]byte{"bench.yaml": []byte(benchYAML)})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			client := serveBench(b, cfg)
			reqs := benchRequests(n)
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					resp, err := client.ShouldRateLimit(context.Background(), reqs[i%benchKeys])
					if err != nil || resp.OverallCode != rlspb.RateLimitResponse_OK {
						b.Fatalf("ShouldRateLimit = %v, %v", resp, err)
					}
					i++
				}
			})
		})
	}
}

// okServer answers every call OK at once: the floor of the gRPC path.
type okServer struct {
	rlspb.UnimplementedRateLimitServiceServer
}

func (okServer) ShouldRateLimit(_ context.Context, r *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK}
	for range r.Descriptors {
		resp.Statuses = append(resp.Statuses, &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK})
	}
	return resp, nil
}

// BenchmarkGRPCFloor is BenchmarkShouldRateLimitGRPC's harness around a
// server that decides nothing: what gRPC itself costs here.
func BenchmarkGRPCFloor(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			client := serveGRPC(b, okServer{})
			reqs := benchRequests(n)
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := client.ShouldRateLimit(context.Background(), reqs[i%benchKeys]); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		})
	}
}

// serveBench serves cfg on the memory store over bufconn.
func serveBench(b *testing.B, cfg *envoyrls.Config) rlspb.RateLimitServiceClient {
	s, err := envoyrls.New(cfg, envoyrls.Options{Store: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})})
	if err != nil {
		b.Fatal(err)
	}
	return serveGRPC(b, s)
}

// serveGRPC serves srv over bufconn and returns a client of it.
func serveGRPC(b *testing.B, srv rlspb.RateLimitServiceServer) rlspb.RateLimitServiceClient {
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	rlspb.RegisterRateLimitServiceServer(gs, srv)
	go gs.Serve(lis)
	b.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return rlspb.NewRateLimitServiceClient(conn)
}

// BenchmarkShouldRateLimitKey is BenchmarkShouldRateLimit with
// Options.Keys: every call carries an API key in its metadata, checked
// through the key cache (the store, SQLite, is asked once per 3 seconds).
func BenchmarkShouldRateLimitKey(b *testing.B) {
	cfg, err := envoyrls.Parse(map[string][]byte{"bench.yaml": []byte(benchYAML)})
	if err != nil {
		b.Fatal(err)
	}
	db := openKeys(b)
	secret, _ := newKey(b, db, auth.ScopeRatelimitCheck)
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			s, err := envoyrls.New(cfg, envoyrls.Options{Store: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), Keys: db})
			if err != nil {
				b.Fatal(err)
			}
			reqs := benchRequests(n)
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+secret))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					resp, err := s.ShouldRateLimit(ctx, reqs[i%benchKeys])
					if err != nil || resp.OverallCode != rlspb.RateLimitResponse_OK {
						b.Fatalf("ShouldRateLimit = %v, %v", resp, err)
					}
					i++
				}
			})
		})
	}
}

// BenchmarkShouldRateLimitGRPCKey is BenchmarkShouldRateLimitGRPC with
// Options.Keys, the client sending its key as authorization metadata.
func BenchmarkShouldRateLimitGRPCKey(b *testing.B) {
	cfg, err := envoyrls.Parse(map[string][]byte{"bench.yaml": []byte(benchYAML)})
	if err != nil {
		b.Fatal(err)
	}
	db := openKeys(b)
	secret, _ := newKey(b, db, auth.ScopeRatelimitCheck)
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			s, err := envoyrls.New(cfg, envoyrls.Options{Store: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), Keys: db})
			if err != nil {
				b.Fatal(err)
			}
			client := serveGRPC(b, s)
			reqs := benchRequests(n)
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+secret)
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					resp, err := client.ShouldRateLimit(ctx, reqs[i%benchKeys])
					if err != nil || resp.OverallCode != rlspb.RateLimitResponse_OK {
						b.Fatalf("ShouldRateLimit = %v, %v", resp, err)
					}
					i++
				}
			})
		})
	}
}
