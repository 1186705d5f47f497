package envoyrls_test

import (
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestLookup: Lookup matches as ShouldRateLimit does and describes the
// rule; a changed rule is a different Limit.
func TestLookup(t *testing.T) {
	t.Parallel()
	cfg, err := envoyrls.Parse(map[string][]byte{"api.yaml": []byte(apiYAML)})
	if err != nil {
		t.Fatal(err)
	}
	e := func(kv ...string) []*commonpb.RateLimitDescriptor_Entry {
		var out []*commonpb.RateLimitDescriptor_Entry
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name    string
		domain  string
		entries []*commonpb.RateLimitDescriptor_Entry
		want    envoyrls.Limit
		ok      bool
	}{
		{"named rule", "api", e("user", "ann"), envoyrls.Limit{Path: "api.user", Name: "per_user", RequestsPerUnit: 3,
			Unit: rlspb.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, Algorithm: ratelimit.FixedWindow, Burst: 3}, true},
		{"unlimited", "api", e("free", "x"), envoyrls.Limit{Path: "api.free", Name: "api.free", Unlimited: true,
			Algorithm: ratelimit.FixedWindow}, true},
		{"shadow", "api", e("shadow", "x"), envoyrls.Limit{Path: "api.shadow", Name: "shadowed", Shadow: true, RequestsPerUnit: 1,
			Unit: rlspb.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, Algorithm: ratelimit.FixedWindow, Burst: 1}, true},
		{"no rule", "api", e("nope", "x"), envoyrls.Limit{}, false},
		{"unknown domain", "web", e("user", "ann"), envoyrls.Limit{}, false},
		{"no entries", "api", nil, envoyrls.Limit{}, false},
	}
	for _, tt := range tests {
		got, ok := cfg.Lookup(tt.domain, tt.entries)
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s: Lookup = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	var none *envoyrls.Config
	if _, ok := none.Lookup("api", e("user", "ann")); ok {
		t.Error("a nil Config matched")
	}
}
