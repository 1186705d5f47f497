package rlqs_test

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice/internal/rlqs"
)

// The documented cost of what one client holds (docs/security.md, "Bounds";
// docs/envoy.md): the measured figures are about a third of these.
const (
	maxBytesPerBucket = 24 << 10  // a tracked bucket of a 4 KiB id, its stream's and the demand table's parts
	maxBytesPerStream = 128 << 10 // an open stream, both ends of it in this process (the race detector grows stacks)
)

// heapBytes is the memory the Go heap and goroutine stacks hold, after a
// collection.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

// bigID is bucket i's id at the bounds: MaxBucketIDBytes in all, in the
// shape given: "wide" is 32 entries, "long" one limited rule's entry of
// 1 KiB and three more ("tenant" sorts last, so the rule does not
// match: "long" measures the id alone, "matched" the id and a share).
func bigID(shape string, i int) map[string]string {
	pad := func(s string, n int) string { return s + strings.Repeat("x", n-len(s)) }
	switch shape {
	case "wide":
		m := map[string]string{}
		for k := range 32 {
			key := fmt.Sprintf("k%02d", k)
			m[key] = pad(fmt.Sprint(i), rlqs.MaxBucketIDBytes/32-len(key))
		}
		return m
	case "matched":
		return map[string]string{"tenant": pad(fmt.Sprint(i), 1024)}
	case "small": // a bucket per client address, as most configurations have
		return map[string]string{"tenant": fmt.Sprintf("203.0.%d.%d", i/256, i%256)}
	}
	m := map[string]string{}
	for k := range 4 {
		m[fmt.Sprintf("k%d", k)] = pad(fmt.Sprint(i), rlqs.MaxBucketIDBytes/4-2)
	}
	return m
}

// fill has e report buckets from..to-1 of shape, 100 a report.
func (e *envoy) fill(shape string, from, to int) {
	e.t.Helper()
	for i := from; i < to; i += 100 {
		m := &rlqspb.RateLimitQuotaUsageReports{}
		for j := i; j < min(i+100, to); j++ {
			m.BucketQuotaUsages = append(m.BucketQuotaUsages, usageOf(bigID(shape, j), 1, 0, iv))
		}
		e.send(m)
		if got := len(e.next().GetBucketAction()); got != min(100, to-i) {
			e.t.Fatalf("%d actions for %d buckets", got, min(100, to-i))
		}
	}
}

// TestBucketCaps: for each cap on buckets, one client fills the table to
// the cap through a real listener, the next bucket ends its stream with
// RESOURCE_EXHAUSTED naming the cap, and the heap grew by less than
// maxBytesPerBucket a bucket; once the streams end, the tables are empty.
// Not parallel: it measures the heap.
func TestBucketCaps(t *testing.T) {
	const limit = 1000
	for _, tc := range []struct {
		name, shape string
		opts        rlqs.Options
		streams     int
		reason      string
		cap         string
	}{
		{"per stream, 32 entries an id", "wide", rlqs.Options{MaxBuckets: limit}, 1, "buckets_per_stream", "rlqs.max_buckets_per_stream"},
		{"per client, 4 entries of 1 KiB", "long", rlqs.Options{MaxBucketsPerClient: limit}, 2, "buckets_per_client", "rlqs.max_buckets_per_client"},
		{"per node, a limited rule's", "matched", rlqs.Options{MaxBucketsPerNode: limit}, 2, "buckets", "rlqs.max_buckets"},
		{"per client, small ids of a limited rule", "small", rlqs.Options{MaxBucketsPerClient: limit}, 1, "buckets_per_client", "rlqs.max_buckets_per_client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := serve(t, parse(t, apiYAML), newClock(), tc.opts)
			before := heapBytes()
			var es []*envoy
			for s := range tc.streams {
				e := n.envoyOf(t, "one client")
				e.fill(tc.shape, s*limit/tc.streams, (s+1)*limit/tc.streams)
				es = append(es, e)
			}
			grew := int64(heapBytes()) - int64(before)
			t.Logf("%d buckets of %q ids: heap +%d bytes, %d a bucket", limit, tc.shape, grew, grew/limit)
			if grew > limit*maxBytesPerBucket {
				t.Errorf("%d buckets hold %d bytes (%d a bucket), want under %d a bucket", limit, grew, grew/limit, maxBytesPerBucket)
			}
			if got := n.metric(t, "sluice_rlqs_tracked_buckets"); got != limit {
				t.Errorf("sluice_rlqs_tracked_buckets = %v, want %d", got, limit)
			}
			last := es[len(es)-1]
			last.send(&rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
				usageOf(bigID(tc.shape, limit), 1, 0, iv)}})
			last.ended(codes.ResourceExhausted, tc.cap)
			if got := n.metric(t, "sluice_rlqs_refused_total", "reason", tc.reason); got != 1 {
				t.Errorf("sluice_rlqs_refused_total{reason=%s} = %v, want 1", tc.reason, got)
			}
			for _, e := range es {
				e.cancel()
			}
			waitGauge(t, n, "sluice_rlqs_tracked_buckets", 0)
			waitGauge(t, n, "sluice_rlqs_bucket_ids", 0)
			waitGauge(t, n, "sluice_rlqs_tracked_clients", 0)
		})
	}
}

// TestStreamCost: one client opens its cap of streams, each reporting one
// bucket; the heap grows by less than maxBytesPerStream a stream (both
// ends: the client's side is in this process too), and the next stream
// is refused. Not parallel: it measures the heap.
func TestStreamCost(t *testing.T) {
	const streams = rlqs.DefaultMaxStreamsPerClient
	n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{})
	before := heapBytes()
	for i := range streams {
		n.envoyOf(t, "one client").report(u(fmt.Sprintf("tenant=%d", i), 1, 0, iv))
	}
	grew := int64(heapBytes()) - int64(before)
	t.Logf("%d streams: heap and stacks +%d bytes, %d a stream", streams, grew, grew/streams)
	if grew > streams*maxBytesPerStream {
		t.Errorf("%d streams hold %d bytes (%d a stream), want under %d a stream", streams, grew, grew/streams, maxBytesPerStream)
	}
	n.envoyOf(t, "one client").ended(codes.ResourceExhausted, "rlqs.max_streams_per_client")
}
