package redisstore

import (
	"math/bits"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// The fast section of a script call carries the single-check allows on
// token buckets, GCRA and fixed windows (Envoy's rules), the bulk of all
// checks, at the least Lua work
// per check: grouped by policy and cost, so a check sends no argument but
// its key, and answered with one number, from which decision rebuilds the
// whole decision in Go (see fastDecision). The profile behind it is in
// docs/benchmarks.md ("The Redis path, and five more goals").

// fast reports whether c travels in the fast section.
func (c *call) fast() bool {
	if c.code != "a" || len(c.checks) != 1 {
		return false
	}
	a := c.checks[0].policy.Algorithm
	return a == ratelimit.TokenBucket || a == ratelimit.GCRA || a == ratelimit.FixedWindow
}

// fastWidth is how many numbers the script answers a fast check with.
func fastWidth(p *ratelimit.Policy) int {
	if p.Algorithm == ratelimit.FixedWindow {
		return 2
	}
	return 1
}

// windowDecision rebuilds the decision of a fast fixed window check of
// cost on p from the script's x (what the window has left minus cost) and
// end (µs to the window's end), as the script's fixed verdict.
func windowDecision(p *ratelimit.Policy, cost, x, end int64) ratelimit.Decision {
	d := ratelimit.Decision{Limit: p.Capacity(), ResetAfter: time.Duration(end) * time.Microsecond}
	if x >= 0 {
		d.Allowed, d.Remaining = true, x
		return d
	}
	d.Remaining = x + cost
	d.RetryAfter = d.ResetAfter
	if d.Remaining >= p.Limit {
		d.ResetAfter = 0 // nothing counted in the window
	}
	return d
}

// bucketParams are the script's prep of a token bucket or GCRA policy: the
// level is counted in 1/unit of a token, rate of them come back per µs,
// and cap is the full level.
type bucketParams struct{ unit, rate, cap int64 }

func bucketOf(p *ratelimit.Policy) bucketParams {
	burst := p.Burst
	if burst == 0 {
		burst = p.Limit
	}
	unit, rate := p.Period.Microseconds(), p.Limit
	if hi, lo := bits.Mul64(uint64(burst), uint64(unit)); hi != 0 || lo >= 1<<53 {
		g := gcd(unit, rate)
		unit, rate = unit/g, rate/g
	}
	return bucketParams{unit: unit, rate: rate, cap: burst * unit}
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// ceilDiv is the script's cdiv: ⌈a/b⌉ for b > 0, and 0 for a <= 0.
func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}

// fastDecision rebuilds the decision of a fast check of cost on p from
// the script's one number x: the bucket's level after the check minus
// what it needed (cost × unit), so x >= 0 when allowed (x is then the
// level left) and x < 0 when refused (the level was x + need). The
// arithmetic is the script's bucket verdict, in exact integers.
func fastDecision(p *ratelimit.Policy, cost, x int64) ratelimit.Decision {
	b := bucketOf(p)
	d := ratelimit.Decision{Limit: p.Capacity()}
	if x >= 0 {
		d.Allowed = true
		d.Remaining = x / b.unit
		d.ResetAfter = time.Duration(ceilDiv(b.cap-x, b.rate)) * time.Microsecond
		return d
	}
	lvl := x + cost*b.unit
	if lvl > 0 {
		d.Remaining = lvl / b.unit
	}
	d.RetryAfter = time.Duration(ceilDiv(-x, b.rate)) * time.Microsecond
	d.ResetAfter = time.Duration(ceilDiv(b.cap-lvl, b.rate)) * time.Microsecond
	return d
}
