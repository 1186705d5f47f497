package rlqs_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/rlqs"
)

// send sends one raw report, the domain on the first.
func (e *envoy) send(m *rlqspb.RateLimitQuotaUsageReports) {
	e.t.Helper()
	if !e.sent {
		m.Domain, e.sent = cmpOr(m.Domain, e.domain), true
	}
	_ = e.stream.Send(m) // an ended stream shows in ended
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// ended waits for the stream's end (answers before it are dropped) and
// checks its status: code, and a message containing want.
func (e *envoy) ended(code codes.Code, want string) {
	e.t.Helper()
	deadline := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-e.resps:
		case <-deadline:
			e.t.Fatalf("the stream is still open after 10s, want %v", code)
		}
	}
	_, err := e.stream.Recv()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), want) {
		e.t.Fatalf("the stream ended with %v, want %v with a message naming %q", err, code, want)
	}
}

func usageOf(bucket map[string]string, allowed, denied uint64, elapsed time.Duration) *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{BucketId: &rlqspb.BucketId{Bucket: bucket},
		TimeElapsed: durationpb.New(elapsed), NumRequestsAllowed: allowed, NumRequestsDenied: denied}
}

// TestCountsThatDoNotFit: a report whose counts do not fit ends its
// stream with INVALID_ARGUMENT before any of it is taken, and the node
// keeps serving. 2^64-1 allowed on a shadow-mode rule used to make a
// negative Add on a counter: a panic that killed the node.
func TestCountsThatDoNotFit(t *testing.T) {
	t.Parallel()
	clk := newClock()
	n := serve(t, parse(t, apiYAML), clk, rlqs.Options{MaxRequestsPerSecond: 1000})
	shadow := map[string]string{"shadow": "x"}
	for _, tc := range []struct {
		name  string
		usage *rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage
		want  string
	}{
		{"2^64-1 allowed on a shadow rule", usageOf(shadow, math.MaxUint64, 0, iv), "at most 2^53"},
		{"2^53+1 denied", usageOf(shadow, 0, 1<<53+1, time.Hour), "at most 2^53"},
		{"2^63 allowed in 10 years", usageOf(shadow, 1<<63, 0, 87600*time.Hour), "at most 2^53"},
		{"past the per-second bound", usageOf(shadow, 7000, 3001, iv), "rlqs.max_requests_per_second"},
		{"past it with no time elapsed", usageOf(shadow, 1001, 0, 0), "rlqs.max_requests_per_second"},
		{"a negative time_elapsed", usageOf(shadow, 1, 0, -time.Second), "time_elapsed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := n.envoy(t)
			e.report(u("shadow=x", 0, 0, 0)) // the rule's share is computed first
			clk.Advance(iv)
			e.send(&rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{tc.usage}})
			e.ended(codes.InvalidArgument, tc.want)
		})
	}
	if got := n.metric(t, "sluice_rlqs_refused_total", "reason", "invalid_report"); got != 6 {
		t.Errorf("sluice_rlqs_refused_total{reason=invalid_report} = %v, want 6", got)
	}
	// The largest counts that fit are taken, and counted, as any.
	e := n.envoy(t)
	e.report(u("shadow=x", 0, 0, 0))
	clk.Advance(iv)
	if got := summary(e.report(u("shadow=x", 10_000, 0, iv))); got != "shadow=x: ALLOW_ALL ttl=30s" {
		t.Errorf("a report at the bound = %s, want ALLOW_ALL", got)
	}
	if got := n.metric(t, "sluice_rlqs_shadow_would_deny_total", "rule", "shadowed"); got < 9_000 || got > 10_000 {
		t.Errorf("sluice_rlqs_shadow_would_deny_total = %v, want about 10,000", got)
	}
}

// TestDomainBounded: a domain past MaxDomainBytes ends the stream with
// INVALID_ARGUMENT; one at the bound is served.
func TestDomainBounded(t *testing.T) {
	t.Parallel()
	n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{})
	e := n.envoy(t)
	e.domain = strings.Repeat("d", rlqs.MaxDomainBytes+1)
	e.send(&rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usageOf(map[string]string{"k": "v"}, 1, 0, 0)}})
	e.ended(codes.InvalidArgument, "domain")
	e = n.envoy(t)
	e.domain = strings.Repeat("d", rlqs.MaxDomainBytes)
	if got := summary(e.report(u("k=v", 1, 0, 0))); got != "k=v: ALLOW_ALL ttl=30s" {
		t.Errorf("a domain at the bound = %s, want the unmatched rule", got)
	}
}

// TestOversizedBucketID: an id over the bounds (MaxBucketIDBytes in all,
// 1 KiB an entry) is not tracked; a rule that matches it answers DENY_ALL
// (a long value does not escape its limit), no rule the unmatched one. An
// id at the bounds is tracked.
func TestOversizedBucketID(t *testing.T) {
	t.Parallel()
	n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{})
	e := n.envoy(t)
	long := strings.Repeat("v", 1000)
	matched := map[string]string{"tenant": strings.Repeat("v", 1025)}
	unmatched := map[string]string{}
	atBound := map[string]string{"f": strings.Repeat("v", rlqs.MaxBucketIDBytes-4*1001-1)}
	for i := range 5 { // 5 x 1001 bytes: past 4 KiB in all, no entry past 1 KiB
		unmatched[string(rune('a'+i))] = long
		if i < 4 {
			atBound[string(rune('a'+i))] = long
		}
	}
	e.send(&rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
		usageOf(matched, 1, 0, 0), usageOf(unmatched, 1, 0, 0), usageOf(atBound, 1, 0, 0)}})
	r := e.next()
	got := map[string]string{}
	for _, a := range r.GetBucketAction() {
		switch len(a.GetBucketId().GetBucket()) {
		case 1:
			got["matched"] = action(a)
		case 5:
			if _, ok := a.GetBucketId().GetBucket()["e"]; ok {
				got["unmatched"] = action(a)
			} else {
				got["at the bound"] = action(a)
			}
		}
	}
	want := map[string]string{"matched": "DENY_ALL ttl=30s", "unmatched": "ALLOW_ALL ttl=30s", "at the bound": "ALLOW_ALL ttl=30s"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("oversized ids = %v, want %v", got, want)
	}
	if got := n.metric(t, "sluice_rlqs_tracked_buckets"); got != 1 {
		t.Errorf("sluice_rlqs_tracked_buckets = %v, want 1 (the id at the bounds only)", got)
	}
}

// TestFirstReportDeadline: a stream that sends no report within
// FirstReportTimeout ends with DEADLINE_EXCEEDED and frees its place.
func TestFirstReportDeadline(t *testing.T) {
	t.Parallel()
	n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{FirstReportTimeout: 100 * time.Millisecond})
	e := n.envoy(t)
	e.ended(codes.DeadlineExceeded, "rlqs.first_report_timeout")
	if got := n.metric(t, "sluice_rlqs_refused_total", "reason", "first_report_timeout"); got != 1 {
		t.Errorf("sluice_rlqs_refused_total{reason=first_report_timeout} = %v, want 1", got)
	}
	waitGauge(t, n, "sluice_rlqs_streams", 0)
}

// TestReportRate: a stream past MaxReportsPerSecond (bursts of twice
// it) ends with RESOURCE_EXHAUSTED; after a second, a stream may report
// again.
func TestReportRate(t *testing.T) {
	t.Parallel()
	clk := newClock()
	n := serve(t, parse(t, apiYAML), clk, rlqs.Options{MaxReportsPerSecond: 5})
	e := n.envoy(t)
	for range 10 { // the burst
		e.report(u("tenant=a", 0, 0, 0))
	}
	clk.Advance(time.Second / 5)
	e.report(u("tenant=a", 0, 0, 0)) // one more token
	e.send(&rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usageOf(map[string]string{"tenant": "a"}, 0, 0, 0)}})
	e.ended(codes.ResourceExhausted, "rlqs.max_reports_per_second")
	if got := n.metric(t, "sluice_rlqs_refused_total", "reason", "reports_per_second"); got != 1 {
		t.Errorf("sluice_rlqs_refused_total{reason=reports_per_second} = %v, want 1", got)
	}
}

// TestStreamsPerClient: one client (here: one peer IP address, the
// default) holds at most MaxStreamsPerClient streams; the next is refused
// with RESOURCE_EXHAUSTED naming the cap, and one that ends frees its
// place. Another client (an API key, with KeyClient) is not affected.
func TestStreamsPerClient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		client func(context.Context) string
		key    func(i int) string // the API key of stream i
	}{
		{"peer address", rlqs.PeerClient, func(i int) string { return "" }},
		{"api key", rlqs.KeyClient, func(i int) string { return "one key" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{MaxStreamsPerClient: 3, ClientID: tc.client})
			var es []*envoy
			for i := range 3 {
				es = append(es, n.envoyOf(t, tc.key(i)))
				es[i].report(u("tenant=a", 0, 0, 0))
			}
			over := n.envoyOf(t, tc.key(3))
			over.ended(codes.ResourceExhausted, "rlqs.max_streams_per_client")
			if got := n.metric(t, "sluice_rlqs_refused_total", "reason", "streams_per_client"); got != 1 {
				t.Errorf("sluice_rlqs_refused_total{reason=streams_per_client} = %v, want 1", got)
			}
			if tc.name == "api key" {
				other := n.envoyOf(t, "another key")
				other.report(u("tenant=a", 0, 0, 0)) // fails the test if refused
			}
			es[0].cancel()
			waitGauge(t, n, "sluice_rlqs_streams", map[string]float64{"peer address": 2, "api key": 3}[tc.name])
			n.envoyOf(t, tc.key(4)).report(u("tenant=b", 0, 0, 0))
		})
	}
}

// TestOneClientManyStreams: one client's streams on one bucket count as
// one client when its limit is divided: a client with five streams does
// not take five sixths of it from a client with one.
func TestOneClientManyStreams(t *testing.T) {
	t.Parallel()
	n := serve(t, parse(t, apiYAML), newClock(), rlqs.Options{})
	var many []*envoy
	for range 5 {
		e := n.envoyOf(t, "client a")
		e.report(u("tenant=acme", 0, 0, 0))
		many = append(many, e)
	}
	b := n.envoyOf(t, "client b")
	if got := share(t, b.report(u("tenant=acme", 0, 0, 0))); got != 50 {
		t.Errorf("the one-stream client's share = %d/min, want 50 (half of 100: two clients)", got)
	}
	// Each stream's latest assignment, read as the pushes arrive, until
	// the five sum to the client's half: polled, not waited on for a quiet
	// spell, which a loaded machine can break.
	last := make([]*rlqspb.RateLimitQuotaResponse, len(many))
	deadline := time.After(30 * time.Second)
	for {
		var sum uint64
		assigned := true
		for i, e := range many {
			for drained := false; !drained; {
				select {
				case r := <-e.resps:
					last[i] = r
				default:
					drained = true
				}
			}
			if last[i] == nil {
				assigned = false
				continue
			}
			sum += share(t, last[i])
		}
		if assigned && sum <= 50 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("the five-stream client's shares sum to %d/min (all assigned: %v), want at most 50", sum, assigned)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitGauge polls a gauge until it reads want.
func waitGauge(t *testing.T, n *node, name string, want float64) {
	t.Helper()
	enginetest.Eventually(t, 10*time.Second, fmt.Sprintf("%s = %v", name, want), func() bool { return n.metric(t, name) == want })
}
