package ratelimit

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Usage-based limits: costs known only after the work ran (tokens an LLM
// produced, bytes served, a login that failed). See the package
// documentation's "Usage-based limits".

// ChargeMode says when a usage reservation charges its keys.
type ChargeMode string

const (
	// ChargeNow charges the estimate when the reservation is taken; settling
	// replaces it by the real cost (a refund or an extra charge).
	ChargeNow ChargeMode = "now"
	// ChargeOnSettle is for limits that count only some outcomes (failed
	// logins): the estimate is charged while the reservation is
	// outstanding, so unsettled reservations count toward the limit, and
	// settling with cost 0 gives all of it back (the outcome is not
	// counted) while a cost above 0 replaces it (a Fixed check keeps its
	// estimate). A reservation that expires unsettled keeps its estimate,
	// as with ChargeNow: an outcome never reported counts.
	ChargeOnSettle ChargeMode = "on_settle"
)

// MaxUsageCost is the largest cost a usage reservation can be settled
// with (2^53-1: the stores keep every quantity exact in a float64, as
// Redis's Lua computes). A caller holding a larger measured cost settles
// with MaxUsageCost rather than failing and keeping the estimate.
const MaxUsageCost = maxExact - 1

// Bounds on unsettled reservations: past them Hold answers ErrTooManyHolds
// and takes nothing, so outstanding reservations cost bounded memory
// however many are taken.
const (
	// DefaultMaxHolds is how many unsettled reservations one key (a
	// check's policy and key) may have at once when UsageOptions.MaxHolds
	// is 0.
	DefaultMaxHolds = 1000
	// DefaultMaxOwnerHolds is how many unsettled reservations one owner
	// (UsageOptions.Owner) may have at once, over every key, when
	// UsageOptions.MaxOwnerHolds is 0.
	DefaultMaxOwnerHolds = 10_000
)

// DefaultReservationTTL is how long a usage reservation may be settled
// when UsageOptions.TTL is 0.
const DefaultReservationTTL = 5 * time.Minute

// Errors of usage reservations.
var (
	// ErrUsageUnsupported is returned for a store that does not implement
	// UsageStore.
	ErrUsageUnsupported = errors.New("the rate limit store does not support usage reservations")
	// ErrReservationNotFound is returned by Settle for an unknown or
	// expired reservation. An expired reservation kept its estimate.
	ErrReservationNotFound = errors.New("no such reservation (unknown, or expired keeping its estimate)")
	// ErrInvalidUsage is returned for a negative cost or an unknown mode.
	ErrInvalidUsage = errors.New("invalid usage charge")
	// ErrTooManyHolds is returned by Hold, which took nothing, when a key
	// or the owner already has as many unsettled reservations as
	// UsageOptions allows.
	ErrTooManyHolds = errors.New("too many unsettled reservations")
)

// UsageOptions configures a usage reservation.
type UsageOptions struct {
	Charge ChargeMode    // "" is ChargeNow
	TTL    time.Duration // how long it may be settled; 0 is DefaultReservationTTL
	// MaxHolds bounds the unsettled reservations of each check's key
	// (policy and key), this one included; 0 is DefaultMaxHolds.
	MaxHolds int
	// Owner names who takes the reservation (an API key's id); "" is no
	// one, and only MaxHolds applies.
	Owner string
	// MaxOwnerHolds bounds Owner's unsettled reservations over every key,
	// this one included; 0 is DefaultMaxOwnerHolds.
	MaxOwnerHolds int
}

// Hold is a usage reservation as a store reports it.
type Hold struct {
	// ID names the reservation for Settle; empty when refused.
	ID        string
	Allowed   bool
	Decisions []Decision // one per check, in order
	// ExpiresAt is when the reservation can no longer be settled.
	ExpiresAt time.Time
}

// Settlement reports what Settle did.
type Settlement struct {
	// Already is true when the reservation had been settled before: this
	// call changed nothing.
	Already bool
}

// UsageStore is a Store that charges after the fact and holds usage
// reservations. The memory and Redis stores implement it; the
// conformance suite pins its behaviour.
type UsageStore interface {
	// Charge charges every check's cost without refusing: work already
	// done is paid for, pushing keys into debt (bounded by each policy's
	// MaxDebt). The decisions describe the keys afterwards: Allowed says
	// whether a request of cost 1 would pass now, RetryAfter when it will.
	Charge(ctx context.Context, checks []Check) ([]Decision, error)
	// Hold checks every check all-or-nothing, as AllowMulti, and when all
	// allow records a reservation of id that Settle can find until the
	// TTL, from any process sharing the store. Concurrency checks take a
	// lease (released by Settle) whatever the mode.
	Hold(ctx context.Context, id string, checks []Check, opts UsageOptions) (Hold, error)
	// Settle replaces the reservation's estimates by cost, atomically on
	// every key; a second Settle changes nothing (and reports Already for
	// a minute after the first, or until the reservation's TTL if sooner;
	// ErrReservationNotFound after).
	Settle(ctx context.Context, id string, cost int64) (Settlement, error)
}

// newReservationID returns a random reservation id: 32 hex digits.
func newReservationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// UsageReservation is an estimate taken before a request whose real cost
// is known only when it ends, like x/time/rate's Reservation: settle it
// with the real cost, or cancel it.
type UsageReservation struct {
	Hold
	store UsageStore
}

// ReserveUsage reserves checks (their Cost is the estimate) on store. When
// r.Allowed is false nothing was taken and r needs no settling.
func ReserveUsage(ctx context.Context, store Store, checks []Check, opts UsageOptions) (*UsageReservation, error) {
	us, ok := store.(UsageStore)
	if !ok {
		return nil, ErrUsageUnsupported
	}
	h, err := us.Hold(ctx, newReservationID(), checks, opts)
	if err != nil {
		return nil, err
	}
	return &UsageReservation{Hold: h, store: us}, nil
}

// Settle replaces the estimate by the real cost: the difference is
// refunded or charged (never refused). Concurrency leases are released. A
// second Settle, or one after Cancel, changes nothing and returns nil.
func (r *UsageReservation) Settle(ctx context.Context, cost int64) error {
	if r == nil || !r.Allowed {
		return nil
	}
	_, err := r.store.Settle(ctx, r.ID, cost)
	return err
}

// Cancel gives the whole estimate back (Settle with cost 0).
func (r *UsageReservation) Cancel(ctx context.Context) error { return r.Settle(ctx, 0) }

// Charge charges checks after the fact on store, never refusing.
func Charge(ctx context.Context, store Store, checks []Check) ([]Decision, error) {
	us, ok := store.(UsageStore)
	if !ok {
		return nil, ErrUsageUnsupported
	}
	return us.Charge(ctx, checks)
}

// Charge charges cost for work already done on key: never refused, it may
// push the key into debt, and then checks are refused until it is repaid.
func (l *PolicyLimiter) Charge(ctx context.Context, key string, cost int64) (Decision, error) {
	ds, err := Charge(ctx, l.store, []Check{l.Check(key, cost)})
	if err != nil {
		return Decision{}, err
	}
	return ds[0], nil
}

// ReserveUsage reserves an estimate on key, to settle with the real cost.
func (l *PolicyLimiter) ReserveUsage(ctx context.Context, key string, estimate int64, opts UsageOptions) (*UsageReservation, error) {
	return ReserveUsage(ctx, l.store, []Check{l.Check(key, estimate)}, opts)
}

// UsageCall names the UsageStore call whose arguments ValidateUsage checks.
type UsageCall int

const (
	// HoldCall checks estimates, as AllowMulti checks costs.
	HoldCall UsageCall = iota
	// ChargeCall checks costs of work already done: at least 0, of any
	// size below 2^53.
	ChargeCall
)

// ValidateUsage checks the arguments every UsageStore validates the same
// way: policies and estimates as AllowMulti, a known mode, a cost of at
// least 0 for Charge and Settle.
func ValidateUsage(checks []Check, opts UsageOptions, call UsageCall) error {
	if opts.Charge != "" && opts.Charge != ChargeNow && opts.Charge != ChargeOnSettle {
		return fmt.Errorf("%w: unknown charge mode %q", ErrInvalidUsage, opts.Charge)
	}
	if opts.TTL < 0 {
		return fmt.Errorf("%w: negative ttl", ErrInvalidUsage)
	}
	if opts.MaxHolds < 0 || opts.MaxOwnerHolds < 0 {
		return fmt.Errorf("%w: negative bound on reservations", ErrInvalidUsage)
	}
	for i, c := range checks {
		if c.Policy == nil {
			return fmt.Errorf("check %d: %w: no policy", i, ErrInvalidPolicy)
		}
		if err := c.Policy.Validate(); err != nil {
			return fmt.Errorf("check %d: %w", i, err)
		}
		if call == ChargeCall {
			if c.Cost < 0 || c.Cost >= maxExact {
				return fmt.Errorf("check %d: %w: cost %d", i, ErrInvalidUsage, c.Cost)
			}
		} else if err := (&params{limit: c.Policy.MaxCost()}).checkCost(c.Cost); err != nil {
			return fmt.Errorf("check %d: %w", i, err)
		}
		for _, d := range checks[:i] {
			if d.Policy.Name == c.Policy.Name && d.Key == c.Key {
				return fmt.Errorf("check %d: %w: policy %q key %q", i, ErrDuplicateCheck, c.Policy.Name, c.Key)
			}
		}
	}
	return nil
}

// HoldBounds returns o's MaxHolds and MaxOwnerHolds, their defaults for 0.
func (o UsageOptions) HoldBounds() (perKey, perOwner int) {
	return cmp.Or(o.MaxHolds, DefaultMaxHolds), cmp.Or(o.MaxOwnerHolds, DefaultMaxOwnerHolds)
}

// ReservationTTL returns o's reservation lifetime, DefaultReservationTTL for 0.
func (o UsageOptions) ReservationTTL() time.Duration {
	if o.TTL == 0 {
		return DefaultReservationTTL
	}
	return o.TTL
}
