package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/ratelimit"
)

// kind is how one descriptor of a request is answered.
type kind uint8

const (
	noLimit   kind = iota // unknown domain, no matching rule, or replaced: OK
	unlimited             // an unlimited rule: OK
	refuse                // requests_per_unit 0: over its limit, no store needed
	peek                  // hits_addend 0 or negative hits: reported, never charged
	charge                // checked and charged in the request's atomic step
	blocked               // carries an entry an emergency block refuses: over, no store needed
	after                 // charge: always with hits: charged after the fact, never refused (usage.go)
)

// item is one descriptor of a request.
type item struct {
	kind  kind
	rule  *rule
	desc  *commonpb.RateLimitDescriptor
	key   string // peek and charge: the counter
	cost  int64
	check int                // charge: index into call.checks
	d     ratelimit.Decision // refuse, peek and blocked
}

// pending is one (policy, key) of the atomic step. Descriptors naming the
// same counter share one pending with their costs added.
type pending struct {
	check  ratelimit.Check
	shadow bool
	never  bool // cost above what the rule can ever admit: refused outright
	d      ratelimit.Decision
}

// call is one ShouldRateLimit call being decided.
type call struct {
	items   []item
	checks  []pending
	passed  bool // no enforced descriptor refused: the charges were taken
	blocked bool // some descriptor is blocked

	// Room for the usual few descriptors, so a call allocates once.
	itemBuf   [4]item
	checkBuf  [4]pending
	activeBuf [4]int
	batchBuf  [4]ratelimit.Check
}

// calls recycles call bookkeeping: with the response, it is most of what a
// call allocates.
var calls = sync.Pool{New: func() any { return new(call) }}

// release returns c to the pool, dropping its references.
func (c *call) release() {
	*c = call{}
	calls.Put(c)
}

// validateRequest applies the checks envoyproxy/ratelimit makes, and
// refuses descriptors the matcher could not read.
func validateRequest(req *rlspb.RateLimitRequest) error {
	if req.GetDomain() == "" {
		return errors.New("rate limit domain must not be empty")
	}
	if len(req.Descriptors) == 0 {
		return errors.New("rate limit descriptor list must not be empty")
	}
	for i, d := range req.Descriptors {
		if len(d.GetEntries()) == 0 {
			return fmt.Errorf("descriptor %d has no entries", i)
		}
		for j, e := range d.Entries {
			if e.GetKey() == "" {
				return fmt.Errorf("descriptor %d entry %d has an empty key", i, j)
			}
		}
	}
	return nil
}

// plan resolves every descriptor of req to its rule (none when d, the
// request's domain, is not configured), cost and counter, or to the block
// refusing it.
func (s *Server) plan(d *domain, req *rlspb.RateLimitRequest) (*call, error) {
	c := calls.Get().(*call)
	c.checks = c.checkBuf[:0]
	if n := len(req.Descriptors); n <= len(c.itemBuf) {
		c.items = c.itemBuf[:n]
	} else {
		c.items = make([]item, n)
	}
	var replaced map[string]bool
	var now time.Time
	if s.blocked != nil {
		now = s.now()
	}
	for i, desc := range req.Descriptors {
		var r *rule
		if d != nil {
			var err error
			if r, err = d.ruleFor(desc); err != nil {
				c.release()
				return nil, fmt.Errorf("descriptor %d: %w", i, err)
			}
		}
		c.items[i] = item{rule: r, desc: desc}
		if s.blocked != nil {
			c.block(&c.items[i], req.Domain, now, s.blocked)
		}
		if r != nil && len(r.replaces) > 0 {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			for _, n := range r.replaces {
				replaced[n] = true
			}
		}
	}
	hits := int64(max(1, req.HitsAddend))
	for i := range c.items {
		it := &c.items[i]
		r := it.rule
		if r != nil && r.limit.Name != "" && replaced[r.limit.Name] {
			it.rule, r = nil, nil
		}
		if r == nil || it.kind == blocked {
			continue
		}
		it.cost = hits
		if h := it.desc.HitsAddend; h != nil {
			it.cost = int64(min(h.Value, math.MaxInt64/2))
		}
		switch {
		case r.unlimited:
			it.kind = unlimited
		case r.rpu == 0:
			it.kind = refuse
			reset := s.windowLeft(r.period())
			it.d = ratelimit.Decision{RetryAfter: reset, ResetAfter: reset}
		case r.always && it.desc.HitsAddend != nil && it.cost > 0 && !it.desc.IsNegativeHits:
			it.kind = after
			it.key = counterKey(d.name, it.desc.Entries)
		case it.cost == 0 || it.desc.IsNegativeHits:
			it.kind = peek
			it.key = counterKey(d.name, it.desc.Entries)
		default:
			it.kind = charge
			it.key = counterKey(d.name, it.desc.Entries)
			c.add(it)
		}
	}
	for i := range c.checks {
		p := &c.checks[i]
		p.never = p.check.Cost > p.check.Policy.MaxCost()
	}
	return c, nil
}

// block marks it blocked when one of its entries is, until the latest
// block's end.
func (c *call) block(it *item, domain string, now time.Time,
	blockedFn func(domain, key, value string, now time.Time) (time.Time, bool)) {
	var until time.Time
	for _, e := range it.desc.Entries {
		if u, ok := blockedFn(domain, e.Key, e.Value, now); ok && u.After(until) {
			until = u
		}
	}
	if until.After(now) {
		left := until.Sub(now)
		it.kind, it.d = blocked, ratelimit.Decision{RetryAfter: left, ResetAfter: left}
		c.blocked = true
	}
}

// add puts a charged item in the atomic step, merging it with an earlier
// descriptor that names the same counter.
func (c *call) add(it *item) {
	for j := range c.checks {
		p := &c.checks[j]
		if p.check.Key == it.key && p.check.Policy.Name == it.rule.policy.Name {
			p.check.Cost = min(p.check.Cost+it.cost, math.MaxInt64/2)
			it.check = j
			return
		}
	}
	it.check = len(c.checks)
	c.checks = append(c.checks, pending{
		check:  ratelimit.Check{Policy: &it.rule.policy, Key: it.key, Cost: it.cost},
		shadow: it.rule.shadow,
	})
}

// windowLeft is the time to the end of the current window of period,
// windows aligned on the Unix epoch.
func (s *Server) windowLeft(period time.Duration) time.Duration {
	now := s.now().UnixMicro()
	p := period.Microseconds()
	return time.Duration(p-now%p) * time.Microsecond
}

// decide charges the request's counters, all or none, and fills in every
// decision. It returns an error only when the atomic step failed.
func (s *Server) decide(ctx context.Context, c *call) error {
	if err := s.chargeAfter(ctx, c); err != nil {
		return err
	}
	enforcedNever := c.blocked
	for _, it := range c.items {
		if it.kind == refuse && !it.rule.shadow {
			enforcedNever = true
		}
	}
	for _, p := range c.checks {
		if p.never && !p.shadow {
			enforcedNever = true
		}
	}
	if enforcedNever {
		// Refused whatever the counters say: charge nothing, report them.
		for i := range c.checks {
			s.peekCheck(ctx, &c.checks[i])
		}
		s.peekItems(ctx, c)
		return nil
	}
	active := c.activeBuf[:0]
	for i := range c.checks {
		if c.checks[i].never {
			s.peekCheck(ctx, &c.checks[i])
			continue
		}
		active = append(active, i)
	}
	passed, err := s.charge(ctx, c.checks, active, c.batchBuf[:0])
	if err != nil {
		return err
	}
	c.passed = passed
	s.peekItems(ctx, c)
	return nil
}

// charge runs the atomic step over the active checks. A refused shadow
// check does not refuse the request: it is dropped and the step is run
// again without it, so the other counters are charged (and it is not).
// passed is false when an enforced check refused; nothing is charged then.
func (s *Server) charge(ctx context.Context, checks []pending, active []int, batch []ratelimit.Check) (passed bool, err error) {
	var one [1]ratelimit.Decision
	for len(active) > 0 {
		batch = batch[:0]
		for _, i := range active {
			batch = append(batch, checks[i].check)
		}
		var ds []ratelimit.Decision
		allowed := false
		if len(batch) == 1 {
			// The common case, without AllowMulti's bookkeeping.
			one[0], err = s.store.Allow(ctx, batch[0].Policy, batch[0].Key, batch[0].Cost)
			ds, allowed = one[:], one[0].Allowed
		} else {
			allowed, ds, err = ratelimit.AllowAll(ctx, s.store, batch)
		}
		if err != nil {
			return false, err
		}
		shadowOnly := true
		for j, i := range active {
			checks[i].d = ds[j]
			if !ds[j].Allowed && !checks[i].shadow {
				shadowOnly = false
			}
		}
		if allowed {
			return true, nil
		}
		if !shadowOnly {
			return false, nil
		}
		keep := active[:0]
		for j, i := range active {
			if ds[j].Allowed {
				keep = append(keep, i)
			}
		}
		active = keep
	}
	return true, nil
}

// peekCheck reports a check's counter without charging it. It is best
// effort: the answer does not depend on it.
func (s *Server) peekCheck(ctx context.Context, p *pending) {
	d, err := s.store.Peek(ctx, p.check.Policy, p.check.Key)
	switch {
	case p.never:
		d.Allowed = false
	case err != nil:
		// Unknown: do not blame this descriptor for the refusal.
		d = ratelimit.Decision{Allowed: true, Limit: p.check.Policy.Capacity()}
	default:
		d.Allowed = d.Remaining >= p.check.Cost
	}
	p.d = d
}

// peekItems reports the counters of descriptors that charge nothing.
func (s *Server) peekItems(ctx context.Context, c *call) {
	for i := range c.items {
		it := &c.items[i]
		if it.kind != peek {
			continue
		}
		p := &it.rule.policy
		d, err := s.store.Peek(ctx, p, it.key)
		if err != nil {
			d = ratelimit.Decision{Limit: p.Capacity()}
		}
		if !it.rule.always { // charge: always: the zero-hit call refuses while in debt
			d.Allowed, d.RetryAfter = true, 0
		}
		it.d = d
	}
}

// counterKey names a descriptor's counter as envoyproxy/ratelimit names its
// cache keys (domain_key_value_..._), without the window, which the store
// keeps. Values are escaped ("_" as "\_", "\" as "\\") so two descriptors
// of one rule never share a counter; keys are fixed by the rule.
func counterKey(domain string, entries []*commonpb.RateLimitDescriptor_Entry) string {
	n := len(domain) + 1
	for _, e := range entries {
		n += len(e.Key) + len(e.Value) + 2
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(domain)
	b.WriteByte('_')
	for _, e := range entries {
		b.WriteString(e.Key)
		b.WriteByte('_')
		if strings.ContainsAny(e.Value, `_\`) {
			for i := 0; i < len(e.Value); i++ {
				if ch := e.Value[i]; ch == '_' || ch == '\\' {
					b.WriteByte('\\')
				}
				b.WriteByte(e.Value[i])
			}
		} else {
			b.WriteString(e.Value)
		}
		b.WriteByte('_')
	}
	return b.String()
}

// descriptorPath names a request descriptor as envoyproxy/ratelimit names
// its stats: domain.key_value.key_value.
func descriptorPath(domain string, entries []*commonpb.RateLimitDescriptor_Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		if e.Value != "" {
			b.WriteByte('_')
			b.WriteString(e.Value)
		}
	}
	return b.String()
}
