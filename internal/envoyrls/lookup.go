package envoyrls

import (
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/ratelimit"
)

// Limit is a configured rule as another service reads it (the rate limit
// quota service assigns shares of it). It is a plain value: two Limits are
// equal when the rule did not change.
type Limit struct {
	// Path is the rule's place in its domain (domain.key_value.key), its
	// Name the rate_limit's name, or Path when it has none.
	Path, Name string
	// Unlimited rules admit everything; a RequestsPerUnit of 0 refuses
	// everything.
	Unlimited bool
	// Shadow rules never refuse: would-be refusals are only counted.
	Shadow bool
	// RequestsPerUnit requests per Unit, whose length is Period.
	RequestsPerUnit uint32
	Unit            rlspb.RateLimitResponse_RateLimit_Unit
	Period          time.Duration
	// Algorithm is the rule's algorithm (fixed_window by default) and
	// Burst its burst (token_bucket and gcra; RequestsPerUnit otherwise).
	Algorithm ratelimit.Algorithm
	Burst     int64
}

// Lookup returns the rule of domain that a descriptor of entries matches,
// with the matching of ShouldRateLimit (exact value, then wildcard, then
// bare key, at the descriptor's depth), and whether there is one. A nil
// Config matches nothing.
func (c *Config) Lookup(domain string, entries []*commonpb.RateLimitDescriptor_Entry) (Limit, bool) {
	if c == nil || len(entries) == 0 {
		return Limit{}, false
	}
	d := c.domains[domain]
	if d == nil {
		return Limit{}, false
	}
	r := d.match(entries)
	if r == nil {
		return Limit{}, false
	}
	l := Limit{Path: r.path, Name: r.name, Unlimited: r.unlimited, Shadow: r.shadow,
		RequestsPerUnit: r.rpu, Unit: r.unit, Period: r.period(),
		Algorithm: r.policy.Algorithm, Burst: r.policy.Burst}
	if l.Algorithm == "" {
		l.Algorithm = ratelimit.FixedWindow
	}
	if l.Burst == 0 {
		l.Burst = int64(r.rpu)
	}
	return l, true
}

// HasDomain reports whether domain is configured.
func (c *Config) HasDomain(domain string) bool {
	return c != nil && c.domains[domain] != nil
}
