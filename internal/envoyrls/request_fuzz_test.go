package envoyrls_test

import (
	"context"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/ratelimit"
)

// fuzzRules cover every kind of answer: a limited descriptor, a nested
// one, shadow mode, unlimited and a wildcard.
const fuzzRules = `domain: fuzz
descriptors:
  - key: database
    value: users
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
    descriptors:
      - key: path
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: prefix
    value: "api*"
    rate_limit: {unit: day, requests_per_unit: 2}
`

// FuzzShouldRateLimit decodes arbitrary bytes as the RateLimitRequest an
// Envoy sends, seeded with real requests (descriptors, hits_addend, limit
// overrides), and asks the service: it answers a response with one status
// per descriptor or a gRPC status error, and never panics.
func FuzzShouldRateLimit(f *testing.F) {
	seeds := []*rlspb.RateLimitRequest{
		{Domain: "fuzz", Descriptors: []*commonpb.RateLimitDescriptor{desc("database", "users")}},
		{Domain: "fuzz", HitsAddend: 3, Descriptors: []*commonpb.RateLimitDescriptor{desc("remote_address", "10.0.0.1", "path", "/login")}},
		{Domain: "fuzz", HitsAddend: 1 << 31, Descriptors: []*commonpb.RateLimitDescriptor{desc("shadow", "x"), desc("free", "y")}},
		{Domain: "fuzz", Descriptors: []*commonpb.RateLimitDescriptor{desc("prefix", "api-1")}},
		{Domain: "fuzz", Descriptors: []*commonpb.RateLimitDescriptor{{
			Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "database", Value: "users"}},
			Limit:   &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: 1},
		}}},
		{Domain: "other", Descriptors: []*commonpb.RateLimitDescriptor{desc("a", "b")}},
		{Domain: "", Descriptors: nil},
	}
	for _, req := range seeds {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	cfg, err := envoyrls.Parse(map[string][]byte{"fuzz.yaml": []byte(fuzzRules)})
	if err != nil {
		f.Fatal(err)
	}
	clk := newClock()
	srv, err := envoyrls.New(cfg, envoyrls.Options{Store: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clk.Now}), Now: clk.Now})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req rlspb.RateLimitRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		resp, err := srv.ShouldRateLimit(context.Background(), &req)
		if err != nil {
			if _, ok := status.FromError(err); !ok {
				t.Fatalf("ShouldRateLimit error %v is not a gRPC status", err)
			}
			return
		}
		if len(req.Descriptors) > 0 && len(resp.Statuses) != len(req.Descriptors) {
			t.Fatalf("%d descriptors answered with %d statuses", len(req.Descriptors), len(resp.Statuses))
		}
	})
}
