package limits

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/ratelimit"
)

// Mode says what a policy does with a request over its limit.
type Mode string

// The modes (docs/ratelimit.md, "Modes").
const (
	Hard   Mode = "hard"   // refuse
	Soft   Mode = "soft"   // admit up to BurstOver more, flagged WouldRefuse
	Shadow Mode = "shadow" // never refuse; count and flag what hard would refuse
)

// Failure says what a policy does while its store is unreachable.
type Failure string

// The store failure behaviours.
const (
	FailOpen   Failure = "open"   // decide on a local limiter at limit / node count
	FailClosed Failure = "closed" // refuse
)

// Sync says how a policy's checks reach a shared store.
type Sync string

// The sync modes (docs/ratelimit.md, "Local sync").
const (
	SyncExact Sync = ""      // every check is one atomic step on the store (the default)
	SyncLocal Sync = "local" // each node decides from its local share, synced every SyncInterval
)

// DefaultSyncInterval is a local policy's sync interval when it names none.
const DefaultSyncInterval = 50 * time.Millisecond

// Source says where a policy comes from.
type Source string

// The policy sources, from the lowest precedence to the highest.
const (
	FromDatabase Source = "database"
	FromConfig   Source = "config"
)

// MaxKeyBytes bounds a rate limit key.
const MaxKeyBytes = 1024

// Period is a policy's period. It reads and writes as a duration string
// ("1m", "1h", "500ms"), and also accepts a whole number of days ("1d").
type Period time.Duration

// ParsePeriod reads "90s", "1m", "1h30m" or "2d".
func ParsePeriod(s string) (Period, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days < 1 || days > 3650 {
			return 0, fmt.Errorf("%q is not a whole number of days between 1 and 3650", s)
		}
		return Period(time.Duration(days) * 24 * time.Hour), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration like 1s, 1m, 1h or 1d", s)
	}
	return Period(d), nil
}

// String writes the period compactly: "1m", "1h30m", "2d", "250ms".
func (p Period) String() string {
	d := time.Duration(p)
	const day = 24 * time.Hour
	if d > 0 && d%day == 0 {
		return strconv.FormatInt(int64(d/day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalText implements encoding.TextMarshaler.
func (p Period) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *Period) UnmarshalText(b []byte) error {
	v, err := ParsePeriod(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// NamedPolicy is a ratelimit.Policy with a name, a mode and a store failure
// rule: the rule a check names.
// The zero Mode is Hard and the zero OnStoreFailure is FailOpen.
// Policies are plain values, safe to copy.
type NamedPolicy struct {
	// Name is what checks name: 1 to 64 letters, digits, '_', '.' or '-',
	// starting with a letter or digit.
	Name string `json:"name" yaml:"name"`
	// Algorithm counts the requests (docs/ratelimit.md, "Algorithms").
	Algorithm ratelimit.Algorithm `json:"algorithm" yaml:"algorithm"`
	// Limit is the requests (or units of cost) admitted per period, from 1
	// to 2^40.
	Limit int64 `json:"limit" yaml:"limit"`
	// Period is the window or refill time, 1ms to 3650d.
	Period Period `json:"period" yaml:"period"`
	// Burst is the bucket's capacity (token_bucket and gcra only); 0
	// means the limit.
	Burst int64 `json:"burst,omitempty" yaml:"burst"`
	// Mode is what a request over the limit gets: hard refuses, soft
	// admits up to burst_over more, flagged, shadow never refuses.
	Mode Mode `json:"mode,omitempty" yaml:"mode"`
	// BurstOver is how far past the limit mode soft admits (required,
	// at least 1, in mode soft only).
	BurstOver int64 `json:"burst_over,omitempty" yaml:"burst_over"`
	// OnStoreFailure is the decision while Redis is unreachable: open
	// decides on a local limiter at limit / nodes, closed refuses.
	OnStoreFailure Failure `json:"on_store_failure,omitempty" yaml:"on_store_failure"`
	// Sync, if local, lets each node decide from its local share, synced
	// with Redis every sync_interval; absent, every check is one atomic
	// step on the store (docs/ratelimit.md, "Local sync").
	Sync Sync `json:"sync,omitempty" yaml:"sync"`
	// SyncInterval is how often a sync local policy syncs (1ms to 1m;
	// 0 means 50ms).
	SyncInterval Period `json:"sync_interval,omitempty" yaml:"sync_interval"`
	// MaxDebt caps how far after-the-fact charges push a key past its
	// limit (0: no cap); see docs/ratelimit.md, "Usage-based limits".
	MaxDebt int64 `json:"max_debt,omitempty" yaml:"max_debt"`
	// Description is free text for people, at most 1024 bytes.
	Description string `json:"description,omitempty" yaml:"description"`
}

var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidName reports whether name may name a policy: 1 to 64 letters,
// digits, '_', '.' or '-', starting with a letter or digit.
func ValidName(name string) bool { return validName.MatchString(name) }

// Normalize fills the defaults: mode hard, on_store_failure open.
func (p NamedPolicy) Normalize() NamedPolicy {
	if p.Mode == "" {
		p.Mode = Hard
	}
	if p.OnStoreFailure == "" {
		p.OnStoreFailure = FailOpen
	}
	if p.Sync == SyncLocal && p.SyncInterval == 0 {
		p.SyncInterval = Period(DefaultSyncInterval)
	}
	return p
}

// Validate returns an apperr Unprocessable error naming every bad field
// (prefixed with prefix, e.g. "policy."), or nil.
func (p NamedPolicy) Validate(prefix string) error {
	return apperr.Fields(apperr.Unprocessable, "the policy is invalid", p.FieldErrors(prefix))
}

// FieldErrors lists what is wrong with p, each field named with prefix.
func (p NamedPolicy) FieldErrors(prefix string) []apperr.FieldError {
	var fe []apperr.FieldError
	bad := func(field, format string, args ...any) {
		fe = append(fe, apperr.FieldError{Field: prefix + field, Detail: fmt.Sprintf(format, args...)})
	}
	if !ValidName(p.Name) {
		bad("name", "must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit")
	}
	switch p.Algorithm {
	case ratelimit.TokenBucket, ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowLog,
		ratelimit.SlidingWindowCounter, ratelimit.Concurrency:
	case "":
		bad("algorithm", "is required")
	default:
		bad("algorithm", "must be one of token_bucket, gcra, fixed_window, sliding_window_log, sliding_window_counter, concurrency")
	}
	const maxLimit = 1 << 40
	if p.Limit < 1 || p.Limit > maxLimit {
		bad("limit", "must be between 1 and %d", int64(maxLimit))
	}
	d := time.Duration(p.Period)
	if d < time.Millisecond || d > 3650*24*time.Hour || d%time.Millisecond != 0 {
		bad("period", "must be a whole number of milliseconds between 1ms and 3650d")
	}
	if p.Burst < 0 || p.Burst > maxLimit {
		bad("burst", "must be between 0 (the limit) and %d", int64(maxLimit))
	}
	if p.Burst > 0 && p.Algorithm != ratelimit.TokenBucket && p.Algorithm != ratelimit.GCRA {
		bad("burst", "applies only to token_bucket and gcra")
	}
	if p.MaxDebt < 0 || p.MaxDebt > maxLimit {
		bad("max_debt", "must be between 0 (no cap) and %d", int64(maxLimit))
	}
	switch p.Mode {
	case "", Hard, Shadow:
		if p.BurstOver != 0 {
			bad("burst_over", "applies only to mode soft")
		}
	case Soft:
		if p.BurstOver < 1 || p.BurstOver > maxLimit {
			bad("burst_over", "must be between 1 and %d in mode soft", int64(maxLimit))
		}
	default:
		bad("mode", "must be hard, soft or shadow")
	}
	switch p.OnStoreFailure {
	case "", FailOpen, FailClosed:
	default:
		bad("on_store_failure", "must be open or closed")
	}
	switch p.Sync {
	case SyncExact:
		if p.SyncInterval != 0 {
			bad("sync_interval", "applies only to sync local")
		}
	case SyncLocal:
		if p.Algorithm == ratelimit.Concurrency {
			bad("sync", "local does not apply to concurrency (a lease is one atomic step)")
		}
		if d := time.Duration(p.SyncInterval); d != 0 && (d < time.Millisecond || d > time.Minute || d%time.Millisecond != 0) {
			bad("sync_interval", "must be a whole number of milliseconds between 1ms and 1m")
		}
	default:
		bad("sync", "must be local or absent")
	}
	if len(p.Description) > 1024 {
		bad("description", "must be at most 1024 bytes")
	}
	if len(fe) == 0 {
		// What is left is arithmetic the library refuses, such as a burst
		// × period too large to stay exact.
		if err := p.Effective().Validate(); err != nil {
			bad("burst", "%s", strings.TrimPrefix(err.Error(), ratelimit.ErrInvalidPolicy.Error()+" "))
		}
	}
	return fe
}

// Effective is the ratelimit.Policy a store applies for p: p itself, or
// for mode soft p with BurstOver added to its capacity. Its Name is p's,
// so the counters of a policy survive changes to its numbers.
func (p NamedPolicy) Effective() ratelimit.Policy {
	rp := ratelimit.Policy{Name: p.Name, Algorithm: p.Algorithm, Limit: p.Limit, Period: time.Duration(p.Period), Burst: p.Burst, MaxDebt: p.MaxDebt}
	if p.Mode == Soft && p.BurstOver > 0 {
		switch p.Algorithm {
		case ratelimit.TokenBucket, ratelimit.GCRA:
			rp.Burst = rp.Capacity() + p.BurstOver
		default:
			rp.Limit += p.BurstOver
		}
	}
	return rp
}

// Capacity is the hard capacity reported as the limit of every decision.
func (p NamedPolicy) Capacity() int64 {
	return ratelimit.Policy{Algorithm: p.Algorithm, Limit: p.Limit, Burst: p.Burst}.Capacity()
}

// Verdict is a store's ratelimit.Decision read under a policy's mode.
type Verdict struct {
	ratelimit.Decision
	// WouldRefuse is set on an allowed decision that the hard form of the
	// policy would have refused (modes soft and shadow).
	WouldRefuse bool
}

// apply turns the store's decision on p.Effective() into the decision of
// p's mode. Live checks and Simulate both go through it.
func (p *NamedPolicy) apply(d ratelimit.Decision) Verdict {
	switch p.Mode {
	case Soft:
		capacity := p.Capacity()
		out := Verdict{Decision: d}
		out.Limit = capacity
		out.Remaining = max(0, d.Remaining-p.BurstOver)
		// Allowed, but into the allowance above the hard capacity.
		out.WouldRefuse = d.Allowed && d.Remaining < p.BurstOver
		return out
	case Shadow:
		out := Verdict{Decision: d, WouldRefuse: !d.Allowed}
		out.Allowed = true
		out.RetryAfter = 0
		return out
	default:
		return Verdict{Decision: d}
	}
}

// Defaults returns the tiers shipped in the database by its migration:
// free (60/min), paid (600/min) and enterprise (6,000/min), token buckets
// with a one-minute burst.
func Defaults() []NamedPolicy {
	tier := func(name string, perMin int64) NamedPolicy {
		return NamedPolicy{Name: name, Algorithm: ratelimit.TokenBucket, Limit: perMin, Period: Period(time.Minute),
			Burst: perMin, Mode: Hard, OnStoreFailure: FailOpen, Description: "shipped default tier"}
	}
	return []NamedPolicy{tier("free", 60), tier("paid", 600), tier("enterprise", 6000)}
}
