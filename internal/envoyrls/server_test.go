package envoyrls_test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/internal/envoyrls"
)

const apiYAML = `
domain: api
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 3}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: free
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {name: shadowed, unit: minute, requests_per_unit: 1}
  - key: path
    value: /login
    rate_limit:
      name: login
      unit: minute
      requests_per_unit: 2
      replaces: [{name: per_user}]
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket, burst: 3}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
`

// summary renders a response compactly: the overall code, then each
// status as code, limit, remaining and seconds until reset.
func summary(r *rlspb.RateLimitResponse) string {
	parts := make([]string, len(r.Statuses))
	for i, s := range r.Statuses {
		switch l := s.CurrentLimit; {
		case l == nil && s.LimitRemaining == math.MaxUint32:
			parts[i] = s.Code.String() + " unlimited"
		case l == nil:
			parts[i] = s.Code.String()
		default:
			parts[i] = fmt.Sprintf("%s %s%d/%s r=%d t=%d", s.Code, name(l.Name), l.RequestsPerUnit, l.Unit,
				s.LimitRemaining, s.DurationUntilReset.GetSeconds())
		}
	}
	return r.OverallCode.String() + " [" + strings.Join(parts, ", ") + "]"
}

func name(n string) string {
	if n == "" {
		return ""
	}
	return n + " "
}

// hits sets a descriptor's own hits_addend.
func hits(d *commonpb.RateLimitDescriptor, n uint64) *commonpb.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// override sets a descriptor's limit override.
func override(d *commonpb.RateLimitDescriptor, rpu uint32, unit typepb.RateLimitUnit) *commonpb.RateLimitDescriptor {
	d.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	return d
}

func withHits(r *rlspb.RateLimitRequest, n uint32) *rlspb.RateLimitRequest {
	r.HitsAddend = n
	return r
}

type step struct {
	advance time.Duration
	req     *rlspb.RateLimitRequest
	want    string
}

func TestShouldRateLimit(t *testing.T) {
	t.Parallel()
	user := func(v string) *commonpb.RateLimitDescriptor { return desc("user", v) }
	tests := []struct {
		name  string
		steps []step
	}{
		{"limit per value, window reset", []step{
			{0, req("api", user("ann")), "OK [OK per_user 3/MINUTE r=2 t=60]"},
			{0, req("api", user("ann")), "OK [OK per_user 3/MINUTE r=1 t=60]"},
			{time.Second, req("api", user("ann")), "OK [OK per_user 3/MINUTE r=0 t=59]"},
			{0, req("api", user("ann")), "OVER_LIMIT [OVER_LIMIT per_user 3/MINUTE r=0 t=59]"},
			{0, req("api", user("bob")), "OK [OK per_user 3/MINUTE r=2 t=59]"},
			{59 * time.Second, req("api", user("ann")), "OK [OK per_user 3/MINUTE r=2 t=60]"},
		}},
		{"unknown domain", []step{{0, req("nope", user("ann")), "OK [OK]"}}},
		{"unmatched descriptor", []step{{0, req("api", desc("zzz", "1")), "OK [OK]"}}},
		{"deeper than any rule", []step{{0, req("api", desc("user", "ann", "x", "y")), "OK [OK]"}}},
		{"request hits_addend", []step{
			{0, withHits(req("api", user("ann")), 2), "OK [OK per_user 3/MINUTE r=1 t=60]"},
			{0, withHits(req("api", user("ann")), 2), "OVER_LIMIT [OVER_LIMIT per_user 3/MINUTE r=1 t=60]"},
			{0, req("api", user("ann")), "OK [OK per_user 3/MINUTE r=0 t=60]"},
		}},
		{"descriptor hits_addend wins over the request's", []step{
			{0, withHits(req("api", hits(user("ann"), 3)), 2), "OK [OK per_user 3/MINUTE r=0 t=60]"},
			{0, req("api", user("ann")), "OVER_LIMIT [OVER_LIMIT per_user 3/MINUTE r=0 t=60]"},
		}},
		{"hits_addend 0 reports without charging", []step{
			{0, req("api", hits(user("ann"), 0)), "OK [OK per_user 3/MINUTE r=3 t=0]"},
			{0, req("api", user("ann")), "OK [OK per_user 3/MINUTE r=2 t=60]"},
			{0, req("api", hits(user("ann"), 0)), "OK [OK per_user 3/MINUTE r=2 t=60]"},
		}},
		{"hits above the limit refused, nothing charged", []step{
			{0, req("api", hits(user("ann"), 4)), "OVER_LIMIT [OVER_LIMIT per_user 3/MINUTE r=3 t=0]"},
			{0, req("api", user("ann")), "OK [OK per_user 3/MINUTE r=2 t=60]"},
		}},
		{"limit override", []step{
			{0, req("api", override(user("ann"), 2, typepb.RateLimitUnit_SECOND)), "OK [OK 2/SECOND r=1 t=1]"},
			{0, req("api", override(user("ann"), 2, typepb.RateLimitUnit_SECOND)), "OK [OK 2/SECOND r=0 t=1]"},
			{0, req("api", override(user("ann"), 2, typepb.RateLimitUnit_SECOND)), "OVER_LIMIT [OVER_LIMIT 2/SECOND r=0 t=1]"},
			{0, req("api", user("ann")), "OK [OK per_user 3/MINUTE r=2 t=60]"},
			{time.Second, req("api", override(user("ann"), 2, typepb.RateLimitUnit_SECOND)), "OK [OK 2/SECOND r=1 t=1]"},
		}},
		{"limit override of an unmatched descriptor", []step{
			{0, req("api", override(desc("zzz", "1"), 1, typepb.RateLimitUnit_MINUTE)), "OK [OK 1/MINUTE r=0 t=60]"},
			{0, req("api", override(desc("zzz", "1"), 1, typepb.RateLimitUnit_MINUTE)), "OVER_LIMIT [OVER_LIMIT 1/MINUTE r=0 t=60]"},
		}},
		{"limit override in an unknown domain", []step{
			{0, req("nope", override(user("ann"), 0, typepb.RateLimitUnit_MINUTE)), "OK [OK]"},
		}},
		{"replaces drops the replaced rule", []step{
			{0, req("api", user("ann"), desc("path", "/login")), "OK [OK, OK login 2/MINUTE r=1 t=60]"},
			{0, req("api", user("ann"), desc("path", "/login")), "OK [OK, OK login 2/MINUTE r=0 t=60]"},
			{0, req("api", user("ann")), "OK [OK per_user 3/MINUTE r=2 t=60]"},
			{0, req("api", desc("path", "/other"), user("ann")), "OK [OK, OK per_user 3/MINUTE r=1 t=60]"},
		}},
		{"shadow never refuses and does not stop the others", []step{
			{0, req("api", desc("shadow", "x")), "OK [OK shadowed 1/MINUTE r=0 t=60]"},
			{0, req("api", desc("shadow", "x"), user("ann")), "OK [OK shadowed 1/MINUTE r=0 t=60, OK per_user 3/MINUTE r=2 t=60]"},
			{0, req("api", desc("shadow", "x"), user("ann")), "OK [OK shadowed 1/MINUTE r=0 t=60, OK per_user 3/MINUTE r=1 t=60]"},
		}},
		{"unlimited", []step{
			{0, req("api", desc("free", "x")), "OK [OK unlimited]"},
			{0, req("api", desc("free", "x"), user("ann")), "OK [OK unlimited, OK per_user 3/MINUTE r=2 t=60]"},
		}},
		{"requests_per_unit 0 always refuses and charges nothing", []step{
			{0, req("api", desc("blocked", "x")), "OVER_LIMIT [OVER_LIMIT 0/HOUR r=0 t=3600]"},
			{0, req("api", desc("blocked", "x"), user("ann")), "OVER_LIMIT [OVER_LIMIT 0/HOUR r=0 t=3600, OK per_user 3/MINUTE r=3 t=0]"},
			{0, req("api", user("ann")), "OK [OK per_user 3/MINUTE r=2 t=60]"},
		}},
		{"all or nothing across descriptors", []step{
			{0, req("api", user("ann"), desc("ip", "1")), "OK [OK per_user 3/MINUTE r=2 t=60, OK 5/MINUTE r=4 t=60]"},
			{0, req("api", user("ann"), desc("ip", "1")), "OK [OK per_user 3/MINUTE r=1 t=60, OK 5/MINUTE r=3 t=60]"},
			{0, req("api", user("ann"), desc("ip", "1")), "OK [OK per_user 3/MINUTE r=0 t=60, OK 5/MINUTE r=2 t=60]"},
			// Nothing charged: the IP has the 2 it had.
			{0, req("api", user("ann"), desc("ip", "1")), "OVER_LIMIT [OVER_LIMIT per_user 3/MINUTE r=0 t=60, OK 5/MINUTE r=2 t=60]"},
			{0, req("api", desc("ip", "1")), "OK [OK 5/MINUTE r=1 t=60]"},
		}},
		{"one descriptor twice counts twice", []step{
			{0, req("api", user("ann"), user("ann")), "OK [OK per_user 3/MINUTE r=1 t=60, OK per_user 3/MINUTE r=1 t=60]"},
			{0, req("api", user("ann"), user("ann")), "OVER_LIMIT [OVER_LIMIT per_user 3/MINUTE r=1 t=60, OVER_LIMIT per_user 3/MINUTE r=1 t=60]"},
		}},
		{"token bucket with a burst", []step{
			{0, req("api", desc("bucket", "x")), "OK [OK 1/SECOND r=2 t=1]"},
			{0, req("api", desc("bucket", "x")), "OK [OK 1/SECOND r=1 t=2]"},
			{0, req("api", desc("bucket", "x")), "OK [OK 1/SECOND r=0 t=3]"},
			{0, req("api", desc("bucket", "x")), "OVER_LIMIT [OVER_LIMIT 1/SECOND r=0 t=1]"},
			{time.Second, req("api", desc("bucket", "x")), "OK [OK 1/SECOND r=0 t=3]"},
		}},
	}
	cfg, err := envoyrls.Parse(map[string][]byte{"api.yaml": []byte(apiYAML)})
	if err != nil {
		t.Fatal(err)
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					b := serveOn(t, cfg, envoyrls.Options{}, be)
					for i, s := range tt.steps {
						b.clock.Advance(s.advance)
						if got := summary(b.call(t, s.req)); got != s.want {
							t.Errorf("step %d: ShouldRateLimit = %s\n want %s", i, got, s.want)
						}
					}
				})
			}
		})
	}
}

func TestConcurrentCallsAdmitExactlyTheLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"api.yaml": apiYAML}, envoyrls.Options{})
	var mu sync.Mutex
	ok := 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for range 10 {
				r := b.call(t, req("api", override(desc("user", "ann"), 100, typepb.RateLimitUnit_MINUTE), desc("ip", "9")))
				if r.OverallCode == rlspb.RateLimitResponse_OK {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	// ip allows 5; user 100: all-or-nothing admits exactly 5, and charged
	// the user's counter 5 times only.
	if ok != 5 {
		t.Errorf("admitted %d, want 5", ok)
	}
	got := summary(b.call(t, req("api", override(desc("user", "ann"), 100, typepb.RateLimitUnit_MINUTE))))
	if want := "OK [OK 100/MINUTE r=94 t=60]"; got != want {
		t.Errorf("after the run: %s, want %s", got, want)
	}
}

func TestTwoNodesShareALimitOnRedis(t *testing.T) {
	t.Parallel()
	// A token bucket, so the server's real clock cannot cross a window
	// boundary mid-test: the next token is 20 minutes away.
	const y = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: token_bucket}\n"
	cfg, err := envoyrls.Parse(map[string][]byte{"api.yaml": []byte(y)})
	if err != nil {
		t.Fatal(err)
	}
	stores := redisStores(t, 2, nil) // the Redis server's clock
	nodes := []*bundle{serveOn(t, cfg, envoyrls.Options{Store: stores[0]}, backends[0]),
		serveOn(t, cfg, envoyrls.Options{Store: stores[1]}, backends[0])}
	var codes []string
	for i := range 6 {
		r := nodes[i%2].call(t, req("api", desc("user", "shared")))
		codes = append(codes, r.OverallCode.String())
	}
	if got, want := strings.Join(codes, " "), "OK OK OK OVER_LIMIT OVER_LIMIT OVER_LIMIT"; got != want {
		t.Errorf("alternating nodes at 3 per minute: %s, want %s", got, want)
	}
}
