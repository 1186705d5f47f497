package limits

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/ratelimit"
)

// UsageRequest is one check of a usage reservation: its Cost is the
// estimate, replaced by the real cost on settle unless Fixed.
type UsageRequest struct {
	CheckRequest
	Fixed bool
}

// Reservation is what Reserve took.
type Reservation struct {
	ID        string // empty when refused
	ExpiresAt time.Time
}

// Reserve decides reqs as Check does, and when they allow holds them as a
// usage reservation that Settle (on any node sharing the store) replaces
// by the real cost. Shadow policies are charged their estimate as in
// Check and not settled. Concurrency policies take a lease.
func (s *Service) Reserve(ctx context.Context, reqs []UsageRequest, opts ratelimit.UsageOptions) (bool, []Result, Reservation, error) {
	start := s.now()
	opts.MaxHolds = cmp.Or(opts.MaxHolds, s.maxHolds)
	opts.MaxOwnerHolds = cmp.Or(opts.MaxOwnerHolds, s.maxOwnerHolds)
	opts.MaxHolds, opts.MaxOwnerHolds = opts.HoldBounds()
	plain := make([]CheckRequest, len(reqs))
	for i, r := range reqs {
		plain[i] = r.CheckRequest
	}
	entries, err := s.resolve(plain)
	if err != nil {
		return false, nil, Reservation{}, err
	}
	results := make([]Result, len(reqs))
	for i, e := range entries {
		results[i] = Result{Policy: e.Name, Key: reqs[i].Key, DecidedBy: ByRule, Mode: e.Mode, Quota: e.Limit, Window: time.Duration(e.Period)}
	}
	if s.applyBlocks(plain, entries, results, start) {
		s.peekRest(ctx, plain, entries, results)
		return false, results, Reservation{}, nil
	}
	var checks []ratelimit.Check
	var hard, shadow []int
	for i, e := range entries {
		if e.Mode == Shadow {
			shadow = append(shadow, i)
			continue
		}
		hard = append(hard, i)
		checks = append(checks, ratelimit.Check{Policy: &e.eff, Key: reqs[i].Key, Cost: reqs[i].Cost, Fixed: reqs[i].Fixed})
	}
	var res Reservation
	allowed := true
	if len(checks) > 0 {
		us, ok := s.counters.(ratelimit.UsageStore)
		if !ok {
			return false, nil, Reservation{}, apperr.New(apperr.Unavailable, "the rate limit store does not support reservations")
		}
		h, err := us.Hold(ctx, rand.Text(), checks, opts)
		if errors.Is(err, ratelimit.ErrTooManyHolds) {
			return false, nil, Reservation{}, apperr.Wrap(apperr.TooMany, err,
				"too many unsettled reservations: at most %d per key (ratelimit.max_holds) and %d per API key "+
					"(ratelimit.max_holds_per_api_key), and ratelimit.max_holds_per_node on a node without Redis; "+
					"settle (or release with cost 0) some before reserving more", opts.MaxHolds, opts.MaxOwnerHolds)
		}
		if err != nil {
			return false, nil, Reservation{}, usageError(err)
		}
		for k, i := range hard {
			results[i].Verdict = entries[i].apply(h.Decisions[k])
		}
		allowed, res = h.Allowed, Reservation{ID: h.ID, ExpiresAt: h.ExpiresAt}
	}
	if !allowed {
		s.peekRest(ctx, plain, entries, results)
	} else {
		for _, i := range shadow {
			d, err := s.counters.Allow(ctx, &entries[i].eff, reqs[i].Key, reqs[i].Cost)
			if err != nil {
				return false, nil, Reservation{}, storeError(err)
			}
			results[i].Verdict = entries[i].apply(d)
		}
	}
	for i := range results {
		s.record(&results[i], allowed)
	}
	return allowed, results, res, nil
}

// Settle replaces reservation id's estimates by cost. already reports a
// reservation settled before (nothing changed). An unknown or expired
// reservation is apperr NotFound.
func (s *Service) Settle(ctx context.Context, id string, cost int64) (already bool, err error) {
	if id == "" {
		return false, apperr.Fields(apperr.Invalid, "the settlement is invalid", []apperr.FieldError{{Field: "reservation_id", Detail: "is required"}})
	}
	if cost < 0 {
		return false, apperr.Fields(apperr.Invalid, "the settlement is invalid", []apperr.FieldError{{Field: "cost", Detail: "must be at least 0"}})
	}
	if !reservationID(id) {
		return false, apperr.New(apperr.NotFound, "no such reservation: not an id this server issues")
	}
	us, ok := s.counters.(ratelimit.UsageStore)
	if !ok {
		return false, apperr.New(apperr.Unavailable, "the rate limit store does not support reservations")
	}
	st, err := us.Settle(ctx, id, cost)
	if err != nil {
		return false, usageError(err)
	}
	return st.Already, nil
}

// maxReservationIDBytes bounds a reservation id: "local-", 64 characters,
// then on a Redis Cluster '~' and a hash tag of up to 2 KiB in base64url.
const maxReservationIDBytes = len(localID) + 64 + 1 + 2731

// reservationID reports whether id has the shape of an id this server
// issues (letters, digits, '-' and '_', with one '~' on a Redis Cluster),
// so that nothing else reaches a store, where ids name keys.
func reservationID(id string) bool {
	if id == "" || len(id) > maxReservationIDBytes {
		return false
	}
	tilde := false
	for i := range len(id) {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		case c == '~' && !tilde && i > 0 && i < len(id)-1:
			tilde = true
		default:
			return false
		}
	}
	return true
}

// Charge charges reqs after the fact: never refused, it may push keys into
// debt (each policy's max_debt caps it). Results describe the keys after
// the charge; Allowed in each says whether a request of cost 1 passes now.
func (s *Service) Charge(ctx context.Context, reqs []CheckRequest) ([]Result, error) {
	probe := make([]CheckRequest, len(reqs))
	var fe []apperr.FieldError
	for i, r := range reqs {
		probe[i] = r
		probe[i].Cost = 1
		if r.Cost < 0 {
			field := "cost"
			if len(reqs) > 1 {
				field = "checks[" + strconv.Itoa(i) + "].cost"
			}
			fe = append(fe, apperr.FieldError{Field: field, Detail: "must be at least 0"})
		}
	}
	if err := apperr.Fields(apperr.Invalid, "the charge is invalid", fe); err != nil {
		return nil, err
	}
	entries, err := s.resolve(probe)
	if err != nil {
		return nil, err
	}
	us, ok := s.counters.(ratelimit.UsageStore)
	if !ok {
		return nil, apperr.New(apperr.Unavailable, "the rate limit store does not support charges")
	}
	checks := make([]ratelimit.Check, len(reqs))
	for i, e := range entries {
		checks[i] = ratelimit.Check{Policy: &e.eff, Key: reqs[i].Key, Cost: reqs[i].Cost}
	}
	ds, err := us.Charge(ctx, checks)
	if err != nil {
		return nil, usageError(err)
	}
	results := make([]Result, len(reqs))
	for i, e := range entries {
		results[i] = Result{Policy: e.Name, Key: reqs[i].Key, DecidedBy: ByRule, Mode: e.Mode, Quota: e.Limit,
			Window: time.Duration(e.Period), Verdict: e.apply(ds[i])}
		s.metrics.decided(e.Name, resultCharged)
	}
	return results, nil
}

// usageError maps a store's usage error for the edge.
func usageError(err error) error {
	switch {
	case errors.Is(err, ratelimit.ErrTooManyHolds):
		return apperr.Wrap(apperr.TooMany, err, "too many unsettled reservations: settle (or release with cost 0) some before reserving more")
	case errors.Is(err, ratelimit.ErrReservationNotFound):
		msg := "no such reservation: unknown, already expired (keeping its estimate), or its store is unavailable"
		if strings.Contains(err.Error(), "unavailable") {
			msg = "the reservation cannot be settled while the rate limit store is unavailable; it keeps its estimate"
		}
		return apperr.Wrap(apperr.NotFound, err, "%s", msg)
	case errors.Is(err, ratelimit.ErrInvalidUsage), errors.Is(err, ratelimit.ErrCostExceedsLimit), errors.Is(err, ratelimit.ErrInvalidCost):
		return apperr.Wrap(apperr.Invalid, err, "%s", err.Error())
	}
	return storeError(err)
}
