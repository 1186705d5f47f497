package ratelimit

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"
)

// Algorithm names a rate limiting algorithm. The names are part of Sluice's
// public contract (policies in the API and in configuration files use them).
type Algorithm string

// The algorithms. See the package documentation for what each one does.
const (
	TokenBucket          Algorithm = "token_bucket"
	GCRA                 Algorithm = "gcra"
	FixedWindow          Algorithm = "fixed_window"
	SlidingWindowLog     Algorithm = "sliding_window_log"
	SlidingWindowCounter Algorithm = "sliding_window_counter"
	Concurrency          Algorithm = "concurrency"
)

// Algorithms lists every algorithm, in the order of the package documentation.
func Algorithms() []Algorithm {
	return []Algorithm{TokenBucket, GCRA, FixedWindow, SlidingWindowLog, SlidingWindowCounter, Concurrency}
}

// Errors returned by stores and limiters. Callers test them with errors.Is.
var (
	// ErrInvalidPolicy wraps every problem Policy.Validate finds.
	ErrInvalidPolicy = errors.New("invalid rate limit policy")
	// ErrInvalidCost is returned for a cost below 1.
	ErrInvalidCost = errors.New("rate limit cost must be at least 1")
	// ErrCostExceedsLimit is returned for a cost the policy can never admit
	// (above Burst for token_bucket and gcra, above Limit otherwise):
	// no RetryAfter would ever come true, so the request is refused outright.
	ErrCostExceedsLimit = errors.New("rate limit cost exceeds what the policy can ever admit")
	// ErrReserveUnsupported is returned by Reserve for algorithms that
	// cannot lend capacity from the future (every one but token_bucket and gcra).
	ErrReserveUnsupported = errors.New("reservations need a token_bucket or gcra policy")
	// ErrDuplicateCheck is returned by AllowAll when two checks name the
	// same policy and key.
	ErrDuplicateCheck = errors.New("the same policy and key appear twice in one check")
	// ErrNotConcurrency is returned by Acquire for a policy that is not a
	// concurrency policy.
	ErrNotConcurrency = errors.New("leases need a concurrency policy")
	// ErrUnavailable is wrapped by a store's errors that mean its backing
	// server could not be reached or could not serve at all (a refused or
	// lost connection, a timeout, a server still loading its data): the
	// same request may succeed later. Any other error is about the request
	// itself. Callers that fall back while the store is down test for it.
	ErrUnavailable = errors.New("rate limit store unavailable")
)

// maxExact is 2^53: every integer below it is exact in a float64, which is
// what Redis's Lua uses for numbers. Stores keep every quantity below it so
// the memory and Redis stores compute the same results.
const maxExact = 1 << 53

// Policy is one rate limit: an algorithm and its parameters.
//
// Limit requests per Period, with bursts up to Burst for token_bucket and
// gcra (Burst 0 means Limit). For concurrency, Limit is the number of
// requests in flight and Period the lease lifetime: a lease not released
// within Period is freed, so a crashed holder does not keep its slot.
// Period must be a positive whole number of microseconds.
//
// The zero Policy is invalid. Policies are plain values, safe to copy and to
// share between goroutines.
type Policy struct {
	Name      string // identifies the policy's counters in a store
	Algorithm Algorithm
	Limit     int64
	Period    time.Duration
	Burst     int64 // token_bucket and gcra only; 0 means Limit
	// MaxDebt caps how far after-the-fact charges (Charge, Settle) may push
	// a key past its limit, in units of cost: tokens below zero for the
	// buckets, a count above Limit for the windows. 0 means no cap (but
	// for the stores' exact arithmetic, below 2^53).
	MaxDebt int64
}

// Validate reports every problem with p, wrapped in ErrInvalidPolicy.
func (p Policy) Validate() error {
	var errs []string
	switch p.Algorithm {
	case TokenBucket, GCRA, FixedWindow, SlidingWindowLog, SlidingWindowCounter, Concurrency:
	case "":
		errs = append(errs, "algorithm is required")
	default:
		errs = append(errs, fmt.Sprintf("unknown algorithm %q", p.Algorithm))
	}
	if p.Limit < 1 {
		errs = append(errs, "limit must be at least 1")
	}
	if p.Limit >= maxExact {
		errs = append(errs, "limit must be below 2^53")
	}
	if p.Period < time.Microsecond || p.Period%time.Microsecond != 0 {
		errs = append(errs, "period must be a positive whole number of microseconds")
	}
	if p.Burst < 0 {
		errs = append(errs, "burst must not be negative")
	}
	if p.MaxDebt < 0 || p.MaxDebt >= maxExact-p.Limit {
		errs = append(errs, "max_debt must be between 0 and 2^53 - limit")
	}
	if strings.ContainsAny(p.Name, "{}") {
		errs = append(errs, "name must not contain braces")
	}
	if len(errs) == 0 && (p.Algorithm == TokenBucket || p.Algorithm == GCRA) {
		if _, _, ok := bucketScale(p.Limit, p.Period.Microseconds(), p.burst()); !ok {
			errs = append(errs, "burst × period / gcd(limit, period µs) must be below 2^53 (use a coarser period or a smaller burst)")
		}
	}
	if len(errs) > 0 {
		name := p.Name
		if name == "" {
			name = "(unnamed)"
		}
		return fmt.Errorf("%w %s: %s", ErrInvalidPolicy, name, strings.Join(errs, "; "))
	}
	return nil
}

// burst is the token bucket's capacity.
func (p *Policy) burst() int64 {
	if p.Burst == 0 {
		return p.Limit
	}
	return p.Burst
}

// MaxCost is the largest cost the policy can ever admit in one request.
func (p Policy) MaxCost() int64 {
	if p.Algorithm == TokenBucket || p.Algorithm == GCRA {
		return p.burst()
	}
	return p.Limit
}

// Capacity is the allowance of a key that has none in use: the Limit
// reported in every Decision (Burst for token_bucket and gcra).
func (p Policy) Capacity() int64 { return p.MaxCost() }

// bucketScale returns the integer scale the token bucket works in: one token
// is unit, and the bucket gains rate per microsecond. It is limit and period
// (in µs) divided by their gcd when burst × period would not stay exact.
func bucketScale(limit, periodMicros, burst int64) (unit, rate int64, ok bool) {
	unit, rate = periodMicros, limit
	if hi, lo := bits.Mul64(uint64(burst), uint64(unit)); hi == 0 && lo < maxExact {
		return unit, rate, true
	}
	g := gcd(unit, rate)
	unit, rate = unit/g, rate/g
	hi, lo := bits.Mul64(uint64(burst), uint64(unit))
	return unit, rate, hi == 0 && lo < maxExact
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// The algorithms' codes in params.code and in the memory store's slots.
const (
	codeTokenBucket = 1 + iota
	codeGCRA
	codeFixedWindow
	codeLog
	codeCounter
	codeConcurrency
)

// params is a policy prepared for the arithmetic of one check.
type params struct {
	code     uint8 // 1 + the algorithm's index in Algorithms: 0 is no state
	limit    int64 // Limit, or Burst for the buckets: the reported Limit
	period   int64 // µs
	unit     int64 // buckets: scaled units per token
	rate     int64 // buckets: scaled units gained per µs
	capacity int64 // buckets: Burst × unit
}

// prepare validates p cheaply (the checks that keep the arithmetic safe) and
// returns its params. Stores call it on every check, so it avoids Validate's
// allocations.
func (p *Policy) prepare() (params, error) {
	var pp params
	if !p.fill(&pp) {
		return params{}, p.Validate()
	}
	return pp, nil
}

// fill sets *pp to p's params, or reports false if p is invalid (and
// Validate says why). Stores' hot paths call it to fill params in place.
func (p *Policy) fill(pp *params) bool {
	if p.Limit < 1 || p.Limit >= maxExact || p.Period < time.Microsecond || p.Period%time.Microsecond != 0 || p.Burst < 0 {
		return false
	}
	pp.limit, pp.period = p.Limit, int64(p.Period/time.Microsecond)
	switch p.Algorithm {
	case TokenBucket, GCRA:
		pp.code = codeTokenBucket
		if p.Algorithm == GCRA {
			pp.code = codeGCRA
		}
		b := p.burst()
		unit, rate, ok := bucketScale(p.Limit, pp.period, b)
		if !ok {
			return false
		}
		pp.limit, pp.unit, pp.rate, pp.capacity = b, unit, rate, b*unit
	case FixedWindow:
		pp.code = codeFixedWindow
	case SlidingWindowLog:
		pp.code = codeLog
	case SlidingWindowCounter:
		pp.code = codeCounter
	case Concurrency:
		pp.code = codeConcurrency
	default:
		return false
	}
	return true
}

// checkCost returns the error for a cost the policy cannot take.
func (pp *params) checkCost(cost int64) error {
	if cost < 1 {
		return ErrInvalidCost
	}
	if cost > pp.limit {
		return fmt.Errorf("%w: cost %d, at most %d", ErrCostExceedsLimit, cost, pp.limit)
	}
	return nil
}
