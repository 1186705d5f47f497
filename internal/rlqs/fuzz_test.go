package rlqs

import (
	"context"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/envoyrls"
)

// FuzzBucketKey: bucket ids are client input. Two different ids never
// share a key, the entries come back in key order, and oversized ids are
// refused rather than tracked.
func FuzzBucketKey(f *testing.F) {
	f.Add("api", "tenant", "acme", "plan", "paid")
	f.Add("a?b", "k&=", "v=&%", "k", "")
	f.Add("", "x", strings.Repeat("v", maxEntryLen+1), "y", "z")
	f.Fuzz(func(t *testing.T, domain, k1, v1, k2, v2 string) {
		a := &rlqspb.BucketId{Bucket: map[string]string{k1: v1}}
		b := &rlqspb.BucketId{Bucket: map[string]string{k1: v1, k2: v2}}
		ka, oka := bucketKey(domain, a)
		kb, okb := bucketKey(domain, b)
		ea, eb := entriesOf(a), entriesOf(b)
		if !oka || !okb {
			if len(k1) <= maxEntryLen && len(v1) <= maxEntryLen && k1 != "" && !oka {
				t.Fatalf("id %v refused", a.Bucket)
			}
			return
		}
		if len(ea) != len(a.Bucket) || len(eb) != len(b.Bucket) {
			t.Fatalf("entries %v, %v for %v, %v", ea, eb, a.Bucket, b.Bucket)
		}
		for i := 1; i < len(eb); i++ {
			if eb[i-1].Key >= eb[i].Key {
				t.Fatalf("entries out of key order: %v", eb)
			}
		}
		if (ka == kb) != maps.Equal(a.Bucket, b.Bucket) {
			t.Fatalf("ids %v and %v: keys %q and %q", a.Bucket, b.Bucket, ka, kb)
		}
		if ko, _ := bucketKey(domain+"x", a); ko == ka {
			t.Fatalf("domains %q and %q share key %q", domain, domain+"x", ka)
		}
	})
}

const fuzzRules = `
domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 0}
`

// FuzzReport: usage reports are client input. Any report, decoded from
// any bytes, goes through the server's report handling (the checks, then
// the accounting, shares and metrics) without a panic; the caps hold, and
// once the stream ends the node holds nothing of it. Seeds are the shapes
// Envoy sends: a first report, a periodic one, a quick one after a new
// assignment, and the counts that once killed the node.
func FuzzReport(f *testing.F) {
	seed := func(m *rlqspb.RateLimitQuotaUsageReports) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, b)
	}
	use := func(k, v string, allowed, denied uint64, elapsed time.Duration) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
		return &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: map[string]string{k: v}},
			TimeElapsed: durationpb.New(elapsed), NumRequestsAllowed: allowed, NumRequestsDenied: denied}
	}
	seed(&rlqspb.RateLimitQuotaUsageReports{Domain: "api", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		use("tenant", "acme", 0, 0, 0), use("shadow", "x", 0, 0, 0)}})
	seed(&rlqspb.RateLimitQuotaUsageReports{Domain: "api", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		use("tenant", "acme", 90, 10, 10*time.Second), use("closed", "1", 0, 5, 10*time.Second), use("nope", "1", 3, 0, 10*time.Second)}})
	seed(&rlqspb.RateLimitQuotaUsageReports{Domain: "api", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		use("tenant", "acme", 2, 0, 300*time.Millisecond)}})
	seed(&rlqspb.RateLimitQuotaUsageReports{Domain: "api", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		use("shadow", "x", math.MaxUint64, 0, 10*time.Second)}})
	seed(&rlqspb.RateLimitQuotaUsageReports{Domain: "api", BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		use("shadow", "x", MaxCount, MaxCount, 1<<62)}})
	cfg, err := envoyrls.Parse(map[string][]byte{"api.yaml": []byte(fuzzRules)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, first, second []byte) {
		now := time.Unix(1_800_000_000, 0)
		s := New(cfg, Options{MaxBuckets: 8, MaxBucketsPerClient: 12, MaxBucketsPerNode: 16,
			MaxRequestsPerSecond: 1000, Now: func() time.Time { return now }})
		ctx := context.Background()
		st, err := s.admit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{first, second} {
			var m rlqspb.RateLimitQuotaUsageReports
			if proto.Unmarshal(b, &m) != nil {
				continue
			}
			if err := s.check(st, &m); err != nil {
				if status.Code(err) != codes.InvalidArgument {
					t.Fatalf("check: %v, want INVALID_ARGUMENT", err)
				}
				break // the stream ends
			}
			actions, err := s.report(ctx, st, &m)
			if err != nil {
				if status.Code(err) != codes.ResourceExhausted {
					t.Fatalf("report: %v, want RESOURCE_EXHAUSTED", err)
				}
				break
			}
			if len(st.buckets) > 8 {
				t.Fatalf("a stream tracks %d buckets, past its cap of 8", len(st.buckets))
			}
			if _, buckets, _ := s.sizes(); buckets != len(st.buckets) {
				t.Fatalf("the node counts %d buckets, the stream tracks %d", buckets, len(st.buckets))
			}
			if len(actions) > len(m.GetBucketQuotaUsages()) {
				t.Fatalf("%d actions for %d usages", len(actions), len(m.GetBucketQuotaUsages()))
			}
			now = now.Add(10 * time.Second)
		}
		s.close(st)
		if clients, buckets, ids := s.sizes(); clients+buckets+ids != 0 {
			t.Fatalf("after the stream ended: %d clients, %d buckets, %d ids held", clients, buckets, ids)
		}
		if len(s.peers)+len(s.groups) != 0 {
			t.Fatalf("after the stream ended: %d peers, %d groups held", len(s.peers), len(s.groups))
		}
	})
}
