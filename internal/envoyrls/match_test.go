package envoyrls

import (
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const matchYAML = `
domain: m
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: exact
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k
    value: ex*
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: k
    value: e*
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: k
    value: "*"
    descriptors:
      - key: never
        rate_limit: {unit: second, requests_per_unit: 99}
  - key: parent
    descriptors:
      - key: child
        rate_limit: {unit: minute, requests_per_unit: 5}
        descriptors:
          - key: grandchild
            value: g
            rate_limit: {unit: hour, requests_per_unit: 6}
  - key: parent
    value: p
    descriptors:
      - key: other
        rate_limit: {unit: day, requests_per_unit: 7}
  - key: nolimit
    descriptors:
      - key: leaf
        rate_limit: {unit: second, requests_per_unit: 8}
`

// entries builds descriptor entries from key, value pairs.
func entries(kv ...string) []*commonpb.RateLimitDescriptor_Entry {
	out := make([]*commonpb.RateLimitDescriptor_Entry, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func TestMatch(t *testing.T) {
	t.Parallel()
	c, err := Parse(map[string][]byte{"m.yaml": []byte(matchYAML)})
	if err != nil {
		t.Fatal(err)
	}
	d := c.domains["m"]
	tests := []struct {
		name    string
		entries []*commonpb.RateLimitDescriptor_Entry
		want    string // rule path, "" for none
	}{
		{"exact value beats wildcard and bare key", entries("k", "exact"), "m.k_exact"},
		{"first wildcard in file order", entries("k", "exactly"), "m.k_ex*"},
		{"shorter wildcard", entries("k", "eel"), "m.k_e*"},
		{"catch-all wildcard has no rule of its own", entries("k", "zzz"), ""},
		{"empty value takes the catch-all wildcard", entries("k", ""), ""},
		{"bare key for an unknown key's value", entries("parent", "x", "child", "c"), "m.parent.child"},
		{"exact parent without the child stops", entries("parent", "p", "child", "c"), ""},
		{"exact parent with its own child", entries("parent", "p", "other", "o"), "m.parent_p.other"},
		{"depth three exact", entries("parent", "x", "child", "c", "grandchild", "g"), "m.parent.child.grandchild_g"},
		{"depth three unknown value", entries("parent", "x", "child", "c", "grandchild", "h"), ""},
		{"request deeper than the tree", entries("parent", "x", "child", "c", "grandchild", "g", "more", "m"), ""},
		{"request shallower than the rule", entries("parent", "x"), ""},
		{"node without a rule", entries("nolimit", "n"), ""},
		{"its child has one", entries("nolimit", "n", "leaf", "l"), "m.nolimit.leaf"},
		{"unknown key", entries("zzz", "1"), ""},
		{"wildcard does not match another key", entries("kk", "exact"), ""},
		{"descriptor under the wildcard", entries("k", "anything", "never", "x"), "m.k_*.never"},
		{"exact then the wildcard's child is not tried", entries("k", "exact", "never", "x"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := ""
			if r := d.match(tt.entries); r != nil {
				got = r.path
			}
			if got != tt.want {
				t.Errorf("match(%v) = %q, want %q", tt.entries, got, tt.want)
			}
		})
	}
}

func TestOverrideRule(t *testing.T) {
	t.Parallel()
	es := entries("k", "v_1")
	tests := []struct {
		name     string
		o        *commonpb.RateLimitDescriptor_RateLimitOverride
		wantErr  bool
		wantPath string
		wantRPU  uint32
	}{
		{"minute", &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9, Unit: typepb.RateLimitUnit_MINUTE}, false, "m.k_v_1", 9},
		{"multiplier", &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9, Unit: typepb.RateLimitUnit_SECOND, UnitMultiplier: wrapperspb.UInt32(30)}, false, "m.k_v_1", 9},
		{"zero refuses", &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 0, Unit: typepb.RateLimitUnit_HOUR}, false, "m.k_v_1", 0},
		{"unknown unit", &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9}, true, "", 0},
		{"huge multiplier", &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9, Unit: typepb.RateLimitUnit_YEAR, UnitMultiplier: wrapperspb.UInt32(1 << 31)}, true, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := overrideRule("m", es, tt.o)
			if (err != nil) != tt.wantErr {
				t.Fatalf("overrideRule = %v, %v; want error %v", r, err, tt.wantErr)
			}
			if err == nil && (r.path != tt.wantPath || r.rpu != tt.wantRPU || r.shadow) {
				t.Errorf("overrideRule = %+v, want path %s rpu %d", r, tt.wantPath, tt.wantRPU)
			}
		})
	}
}

func TestCounterKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		entries []*commonpb.RateLimitDescriptor_Entry
		want    string
	}{
		{"like envoyproxy/ratelimit", entries("remote_address", "10.0.0.1", "path", "/a"), "dom_remote_address_10.0.0.1_path_/a_"},
		{"underscore in a value is escaped", entries("k", "a_b"), `dom_k_a\_b_`},
		{"backslash in a value is escaped", entries("k", `a\`), `dom_k_a\\_`},
		{"empty value", entries("k", ""), "dom_k__"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := counterKey("dom", tt.entries); got != tt.want {
				t.Errorf("counterKey = %q, want %q", got, tt.want)
			}
		})
	}
	// Values that would collide unescaped stay apart.
	a := counterKey("d", entries("k1", "x_k2_y", "k2", "z"))
	b := counterKey("d", entries("k1", "x", "k2", "y_k2_z"))
	if a == b {
		t.Errorf("counterKey collides: %q", a)
	}
}
