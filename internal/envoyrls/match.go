package envoyrls

import (
	"fmt"
	"math"
	"strings"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/ratelimit"
)

// ruleFor returns the rule applying to desc in d, or nil for no limit.
// A descriptor's limit override takes precedence over the configuration,
// as in envoyproxy/ratelimit.
func (d *domain) ruleFor(desc *commonpb.RateLimitDescriptor) (*rule, error) {
	if o := desc.GetLimit(); o != nil {
		return overrideRule(d.name, desc.Entries, o)
	}
	return d.match(desc.Entries), nil
}

// match walks the tree with a descriptor's entries: at each level the
// exact key and value, else the first wildcard whose prefix the value
// starts with, else the bare key. The rule of the node reached by the last
// entry applies; a walk that stops early matches nothing.
func (d *domain) match(entries []*commonpb.RateLimitDescriptor_Entry) *rule {
	n := &d.root
	for i, e := range entries {
		next := n.exact[entryKey{e.Key, e.Value}]
		if next == nil {
			for _, w := range n.wildcards {
				if w.key == e.Key && strings.HasPrefix(e.Value, w.prefix) {
					next = w.node
					break
				}
			}
		}
		if next == nil {
			next = n.bare[e.Key]
		}
		if next == nil {
			return nil
		}
		if i == len(entries)-1 {
			return next.rule
		}
		n = next
	}
	return nil
}

// overrideRule is the fixed window a descriptor's limit override asks for.
// Like envoyproxy/ratelimit's, it is never in shadow mode and has no name.
func overrideRule(domain string, entries []*commonpb.RateLimitDescriptor_Entry, o *commonpb.RateLimitDescriptor_RateLimitOverride) (*rule, error) {
	unit := rlspb.RateLimitResponse_RateLimit_Unit(o.Unit)
	base, ok := units[unit]
	if !ok {
		return nil, fmt.Errorf("limit override has unknown unit %d", o.Unit)
	}
	mult := uint32(1)
	if m := o.GetUnitMultiplier(); m != nil && m.Value > 1 {
		mult = m.Value
	}
	if int64(mult) > math.MaxInt64/int64(base)/1000 {
		return nil, fmt.Errorf("limit override period of %d %s is too long", mult, unit)
	}
	r, err := newRule(descriptorPath(domain, entries), "", unit, mult, o.RequestsPerUnit, ratelimit.FixedWindow, 0)
	if err != nil {
		return nil, fmt.Errorf("limit override: %w", err)
	}
	return r, nil
}
