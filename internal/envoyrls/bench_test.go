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

// call is one ShouldRateLimit call of a benchmark: in process or through
// a gRPC client.
type call func(*rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error)

// runCalls has b's goroutines (with grpc, 64 callers at once) make calls
// going round reqs, and fails b on an error or an answer other than OK.
func runCalls(b *testing.B, reqs []*rlspb.RateLimitRequest, grpc bool, do call) {
	b.ReportAllocs()
	if grpc {
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			resp, err := do(reqs[i%benchKeys])
			if err != nil || resp.OverallCode != rlspb.RateLimitResponse_OK {
				b.Fatalf("ShouldRateLimit = %v, %v", resp, err)
			}
			i++
		}
	})
}

// benchService is the service of benchYAML on the memory store, requiring
// API keys from keys when it is not nil.
func benchService(b *testing.B, keys envoyrls.KeyStore) *envoyrls.Server {
	cfg, err := envoyrls.Parse(map[string][]byte{"bench.yaml": []byte(benchYAML)})
	if err != nil {
		b.Fatal(err)
	}
	s, err := envoyrls.New(cfg, envoyrls.Options{Store: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), Keys: keys})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// descriptorCounts are the requests' sizes every benchmark runs: one
// descriptor, and three.
var descriptorCounts = []int{1, 3}

// BenchmarkShouldRateLimit calls the service in process (no gRPC), with
// one and with three descriptors per request, on the memory store.
func BenchmarkShouldRateLimit(b *testing.B) {
	for _, n := range descriptorCounts {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			s, ctx := benchService(b, nil), context.Background()
			runCalls(b, benchRequests(n), false, func(r *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
				return s.ShouldRateLimit(ctx, r)
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
	for _, n := range descriptorCounts {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			client, ctx := serveGRPC(b, benchService(b, nil)), context.Background()
			runCalls(b, benchRequests(n), true, func(r *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
				return client.ShouldRateLimit(ctx, r)
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
	for _, n := range descriptorCounts {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			client, ctx := serveGRPC(b, okServer{}), context.Background()
			runCalls(b, benchRequests(n), true, func(r *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
				return client.ShouldRateLimit(ctx, r)
			})
		})
	}
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
	db := openKeys(b)
	secret, _ := newKey(b, db, auth.ScopeRatelimitCheck)
	for _, n := range descriptorCounts {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			s := benchService(b, db)
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+secret))
			runCalls(b, benchRequests(n), false, func(r *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
				return s.ShouldRateLimit(ctx, r)
			})
		})
	}
}

// BenchmarkShouldRateLimitGRPCKey is BenchmarkShouldRateLimitGRPC with
// Options.Keys, the client sending its key as authorization metadata.
func BenchmarkShouldRateLimitGRPCKey(b *testing.B) {
	db := openKeys(b)
	secret, _ := newKey(b, db, auth.ScopeRatelimitCheck)
	for _, n := range descriptorCounts {
		b.Run(strconv.Itoa(n)+"_descriptors", func(b *testing.B) {
			client := serveGRPC(b, benchService(b, db))
			ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+secret)
			runCalls(b, benchRequests(n), true, func(r *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
				return client.ShouldRateLimit(ctx, r)
			})
		})
	}
}
