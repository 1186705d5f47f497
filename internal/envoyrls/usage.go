package envoyrls

import (
	"context"
	"math"

	"github.com/sluicehq/sluice/ratelimit"
)

// Usage-based limits behind Envoy (charge: always): see the package doc,
// "Usage-based limits".

// chargeAfter charges the call's after items, never refused, whatever the
// other descriptors decide, and records each one's state afterwards.
func (s *Server) chargeAfter(ctx context.Context, c *call) error {
	var checks []ratelimit.Check
	for i := range c.items {
		it := &c.items[i]
		if it.kind != after {
			continue
		}
		merged := false // one counter named twice is charged once, both hits added
		for j, ch := range checks {
			if ch.Key == it.key && ch.Policy.Name == it.rule.policy.Name {
				checks[j].Cost = min(ch.Cost+it.cost, math.MaxInt64/2)
				merged = true
			}
		}
		if !merged {
			checks = append(checks, ratelimit.Check{Policy: &it.rule.policy, Key: it.key, Cost: min(it.cost, 1<<53-1)})
		}
	}
	if len(checks) == 0 {
		return nil
	}
	ds, err := ratelimit.Charge(ctx, s.store, checks)
	if err != nil {
		return err
	}
	for j, d := range ds {
		d.Allowed = true // a charge is never refused
		for i := range c.items {
			it := &c.items[i]
			if it.kind == after && it.key == checks[j].Key && it.rule.policy.Name == checks[j].Policy.Name {
				it.d = d
			}
		}
	}
	return nil
}
