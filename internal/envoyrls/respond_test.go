package envoyrls_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/ratelimit"
)

// headerText renders response headers one per line.
func headerText(r *rlspb.RateLimitResponse) string {
	var b strings.Builder
	for _, h := range r.ResponseHeadersToAdd {
		b.WriteString(h.Key + ": " + h.Value + "\n")
	}
	return b.String()
}

func TestResponseHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		calls int // identical calls before the one checked
		req   *rlspb.RateLimitRequest
		want  string
	}{
		{"every descriptor; X- for the most constrained", 0, req("api", desc("ip", "1"), desc("user", "ann")),
			"RateLimit-Policy: \"api.ip\";q=5;w=60, \"per_user\";q=3;w=60\nRateLimit: \"api.ip\";r=4;t=60, \"per_user\";r=2;t=60\n" +
				"X-RateLimit-Limit: 3\nX-RateLimit-Remaining: 2\nX-RateLimit-Reset: 60\n"},
		{"an unnamed rule goes by its path", 0, req("api", desc("ip", "1")),
			"RateLimit-Policy: \"api.ip\";q=5;w=60\nRateLimit: \"api.ip\";r=4;t=60\n" +
				"X-RateLimit-Limit: 5\nX-RateLimit-Remaining: 4\nX-RateLimit-Reset: 60\n"},
		{"refused: nothing charged, X- and Retry-After for the refusing descriptor", 3, req("api", desc("user", "ann"), desc("ip", "1")),
			"RateLimit-Policy: \"per_user\";q=3;w=60, \"api.ip\";q=5;w=60\nRateLimit: \"per_user\";r=0;t=60, \"api.ip\";r=2;t=60\n" +
				"X-RateLimit-Limit: 3\nX-RateLimit-Remaining: 0\nX-RateLimit-Reset: 60\nRetry-After: 60\n"},
		{"shadow rules stay invisible", 0, req("api", desc("shadow", "x")), ""},
		{"no limit, no headers", 0, req("api", desc("zzz", "x")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, map[string]string{"api.yaml": apiYAML}, envoyrls.Options{})
			for range tt.calls {
				b.call(t, tt.req)
			}
			if got := headerText(b.call(t, tt.req)); got != tt.want {
				t.Errorf("headers:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestRefusalHeadersReportWhatRemains: 3 a minute and 1,000 a day; the
// fourth request is refused by the minute and charges nothing, so the
// day's r is what remains of it, 997, which the next request finds.
func TestRefusalHeadersReportWhatRemains(t *testing.T) {
	t.Parallel()
	const yaml = `
domain: api
descriptors:
  - key: user
    rate_limit: {name: tiny, unit: minute, requests_per_unit: 3}
  - key: account
    rate_limit: {name: daily, unit: day, requests_per_unit: 1000}
`
	b := setup(t, map[string]string{"api.yaml": yaml}, envoyrls.Options{})
	both := req("api", desc("user", "ann"), desc("account", "ann"))
	var resp *rlspb.RateLimitResponse
	for range 4 {
		resp = b.call(t, both)
	}
	var rl string
	for _, h := range resp.ResponseHeadersToAdd {
		if h.Key == "RateLimit" {
			rl = h.Value
		}
	}
	if resp.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT || !strings.HasPrefix(rl, `"tiny";r=0;t=60, "daily";r=997;t=`) {
		t.Errorf("4th request = %v RateLimit %q, want OVER_LIMIT with tiny r=0 and daily r=997", resp.OverallCode, rl)
	}
	if got := resp.Statuses[1].LimitRemaining; got != 997 {
		t.Errorf("the daily descriptor's limit_remaining = %d, want 997", got)
	}
	if got := summary(b.call(t, req("api", desc("account", "ann")))); !strings.Contains(got, "r=996") {
		t.Errorf("the next daily request = %s, want r=996: the key held 997", got)
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"api.yaml": apiYAML}, envoyrls.Options{})
	badUnit := override(desc("user", "ann"), 1, typepb.RateLimitUnit_UNKNOWN)
	tests := []struct {
		name string
		req  *rlspb.RateLimitRequest
		want string
	}{
		{"empty domain", req("", desc("user", "ann")), "domain must not be empty"},
		{"no descriptors", req("api"), "descriptor list must not be empty"},
		{"descriptor without entries", req("api", desc("user", "ann"), &commonpb.RateLimitDescriptor{}), "descriptor 1 has no entries"},
		{"entry with an empty key", req("api", desc("", "x")), "descriptor 0 entry 0 has an empty key"},
		{"override with an unknown unit", req("api", badUnit), "unknown unit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := b.client.ShouldRateLimit(context.Background(), tt.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ShouldRateLimit = %v, want INVALID_ARGUMENT containing %q", err, tt.want)
			}
		})
	}
	if got := summary(b.call(t, req("api", desc("user", "ann")))); got != "OK [OK per_user 3/MINUTE r=2 t=60]" {
		t.Errorf("after invalid requests: %s; want nothing charged", got)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"api.yaml": apiYAML}, envoyrls.Options{})
	for range 6 {
		b.call(t, req("api", desc("ip", "1")))
	}
	b.call(t, req("api", desc("shadow", "x")))
	b.call(t, req("api", desc("shadow", "x")))
	b.call(t, req("api", desc("detailed", "d1")))
	b.call(t, req("api", desc("zzz", "x")))
	b.call(t, req("nope", desc("ip", "1")))
	dom := []string{"domain", "api", "descriptor", ""}
	tests := []struct {
		name   string
		metric string
		labels []string
		want   float64
	}{
		{"requests: descriptors with a limit", "sluice_envoy_requests_total", dom, 8},
		{"over limit", "sluice_envoy_over_limit_total", dom, 1},
		{"near limit: the 5th of 5 and the shadow's 1st of 1 are past 80%", "sluice_envoy_near_limit_total", dom, 2},
		{"shadow over limit", "sluice_envoy_shadow_over_limit_total", dom, 1},
		{"detailed_metric labels the descriptor", "sluice_envoy_requests_total", []string{"domain", "api", "descriptor", "api.detailed_d1"}, 1},
		{"unknown domains make no series", "sluice_envoy_requests_total", []string{"domain", "nope"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := b.metric(t, tt.metric, tt.labels...); got != tt.want {
				t.Errorf("%s%v = %v, want %v", tt.metric, tt.labels, got, tt.want)
			}
		})
	}
}

// TestDetailedMetricValuesBounded: detailed_metric labels the first
// DetailedMetricValues distinct descriptors of a domain; later ones are
// counted under "other", so a client sending fresh values cannot grow
// /metrics without bound or read other clients' identifiers there.
func TestDetailedMetricValuesBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"api.yaml": apiYAML}, envoyrls.Options{DetailedMetricValues: 3})
	for _, v := range []string{"a", "b", "a", "c", "d", "e", "a", "d"} {
		b.call(t, req("api", desc("detailed", v)))
	}
	want := map[string]float64{"api.detailed_a": 3, "api.detailed_b": 1, "api.detailed_c": 1,
		"api.detailed_d": 0, "api.detailed_e": 0, "other": 3}
	for label, n := range want {
		if got := b.metric(t, "sluice_envoy_requests_total", "domain", "api", "descriptor", label); got != n {
			t.Errorf("sluice_envoy_requests_total{descriptor=%q} = %v, want %v", label, got, n)
		}
	}
}

func TestDetailedMetricValuesDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"api.yaml": apiYAML}, envoyrls.Options{})
	for i := range 101 {
		b.call(t, req("api", desc("detailed", fmt.Sprint("v", i))))
	}
	if got := b.metric(t, "sluice_envoy_requests_total", "domain", "api", "descriptor", "api.detailed_v99"); got != 1 {
		t.Errorf("the 100th value's series = %v, want 1", got)
	}
	if got := b.metric(t, "sluice_envoy_requests_total", "domain", "api", "descriptor", "other"); got != 1 {
		t.Errorf("other = %v, want 1 (the 101st value)", got)
	}
}

// brokenStore fails every check, like a store whose server is gone.
type brokenStore struct{ ratelimit.Store }

var errBroken = errors.New("connection refused")

func (brokenStore) Allow(context.Context, *ratelimit.Policy, string, int64) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errBroken
}

func (brokenStore) AllowMulti(context.Context, []ratelimit.Check) ([]ratelimit.Decision, error) {
	return nil, errBroken
}

func (brokenStore) Peek(context.Context, *ratelimit.Policy, string) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errBroken
}

func TestStoreFailure(t *testing.T) {
	t.Parallel()
	store := brokenStore{ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})}
	t.Run("fail open", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]string{"api.yaml": apiYAML}, envoyrls.Options{Store: store})
		for range 3 {
			got := summary(b.call(t, req("api", desc("user", "ann"), desc("ip", "1"))))
			if want := "OK [OK per_user 3/MINUTE r=0 t=0, OK 5/MINUTE r=0 t=0]"; got != want {
				t.Errorf("ShouldRateLimit = %s, want %s", got, want)
			}
		}
		if got := b.metric(t, "sluice_envoy_store_errors_total", "domain", "api"); got != 3 {
			t.Errorf("store errors = %v, want 3", got)
		}
		if logs := b.logs.String(); strings.Count(logs, "store failed") != 1 || !strings.Contains(logs, "connection refused") {
			t.Errorf("logs = %s; want the failure logged once with its cause", logs)
		}
		got := summary(b.call(t, req("api", desc("blocked", "x"), desc("user", "ann"))))
		if want := "OVER_LIMIT [OVER_LIMIT 0/HOUR r=0 t=3600, OK per_user 3/MINUTE r=0 t=0]"; got != want {
			t.Errorf("a zero rule needs no store: %s, want %s", got, want)
		}
	})
	t.Run("fail closed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, map[string]string{"api.yaml": apiYAML}, envoyrls.Options{Store: store, FailClosed: true})
		_, err := b.client.ShouldRateLimit(context.Background(), req("api", desc("user", "ann")))
		if status.Code(err) != codes.Unavailable {
			t.Errorf("ShouldRateLimit = %v, want UNAVAILABLE", err)
		}
	})
}

func TestNewNeedsAStore(t *testing.T) {
	t.Parallel()
	if _, err := envoyrls.New(nil, envoyrls.Options{}); err == nil {
		t.Error("New without a store = nil error")
	}
}
