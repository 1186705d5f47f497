package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// Usage-based limits over HTTP (docs/ratelimit.md, "Usage-based limits"):
// "reserve": true and "charge": "on_settle" reserve an estimate that
// POST /v1/ratelimit/settle replaces by the real cost, "charge": "after"
// charges work already done, and a check naming a concurrency policy
// answers a lease to settle (release) when the work ends.

// UsageLimiter is what the usage routes need beyond Ratelimiter:
// *limits.Service.
type UsageLimiter interface {
	Reserve(ctx context.Context, reqs []limits.UsageRequest, opts ratelimit.UsageOptions) (bool, []limits.Result, limits.Reservation, error)
	Settle(ctx context.Context, id string, cost int64) (already bool, err error)
	Charge(ctx context.Context, reqs []limits.CheckRequest) ([]limits.Result, error)
}

// usageFields are the check body's usage fields.
type usageFields struct {
	Charge         string `json:"charge,omitempty"`
	ReservationTTL string `json:"reservation_ttl,omitempty"`
}

type reservationJSON struct {
	ReservationID        string `json:"reservation_id,omitempty"`
	ReservationExpiresAt string `json:"reservation_expires_at,omitempty"`
}

// The usage modes of a check.
const (
	modeReserve  = "reserve"   // "reserve": true
	modeOnSettle = "on_settle" // "charge": "on_settle"
	modeAfter    = "after"     // "charge": "after"
	modeLease    = "lease"     // a concurrency policy: its lease is released by settling
)

// maxReservationTTL bounds "reservation_ttl".
const maxReservationTTL = 24 * time.Hour

// usageMode returns the check's usage mode, or "" for a plain check.
func usageMode(rl Ratelimiter, body checkBody, items []checkItem) (string, error) {
	reserve := body.Reserve != nil && *body.Reserve
	switch body.Charge {
	case "":
	case modeOnSettle:
		return modeOnSettle, nil
	case modeAfter:
		if reserve {
			return "", apperr.Fields(apperr.Invalid, "the check is invalid", []apperr.FieldError{{Field: "reserve", Detail: `cannot be combined with "charge": "after"`}})
		}
		return modeAfter, nil
	default:
		return "", apperr.Fields(apperr.Invalid, "the check is invalid", []apperr.FieldError{{Field: "charge", Detail: `must be "on_settle" or "after"`}})
	}
	if reserve {
		return modeReserve, nil
	}
	for _, it := range items {
		if p, _, err := rl.Policy(it.Policy); err == nil && p.Algorithm == ratelimit.Concurrency {
			return modeLease, nil
		}
	}
	if body.ReservationTTL != "" {
		return "", apperr.Fields(apperr.Invalid, "the check is invalid", []apperr.FieldError{{Field: "reservation_ttl", Detail: "applies only to reservations"}})
	}
	return "", nil
}

func checkUsage(rl Ratelimiter, w http.ResponseWriter, r *http.Request, body checkBody, items []checkItem, reqs []limits.CheckRequest, mode string) error {
	ul, ok := rl.(UsageLimiter)
	if !ok {
		return apperr.New(apperr.Unavailable, "usage-based limits are not enabled on this server")
	}
	single := body.Checks == nil
	if mode == modeAfter {
		results, err := ul.Charge(r.Context(), reqs)
		if err != nil {
			return err
		}
		writeCheck(w, single, true, results, reservationJSON{})
		return nil
	}
	// The caller's API key owns the reservation: its unsettled ones are
	// bounded over every key (ratelimit.DefaultMaxOwnerHolds).
	opts := ratelimit.UsageOptions{Owner: callerOf(r).ID}
	if mode == modeOnSettle {
		opts.Charge = ratelimit.ChargeOnSettle
	}
	if body.ReservationTTL != "" {
		p, err := limits.ParsePeriod(body.ReservationTTL)
		if err != nil || p <= 0 || time.Duration(p) > maxReservationTTL {
			return apperr.Fields(apperr.Invalid, "the check is invalid", []apperr.FieldError{{Field: "reservation_ttl", Detail: "must be a duration between 1ms and 24h"}})
		}
		opts.TTL = time.Duration(p)
	}
	ureqs := make([]limits.UsageRequest, len(reqs))
	for i, req := range reqs {
		ureqs[i] = limits.UsageRequest{CheckRequest: req}
		switch {
		case mode == modeLease: // only the lease is settled; the rest is charged now
			ureqs[i].Fixed = true
		case !single && items[i].Reserve != nil && !*items[i].Reserve:
			ureqs[i].Fixed = true
		}
	}
	allowed, results, res, err := ul.Reserve(r.Context(), ureqs, opts)
	if err != nil {
		return err
	}
	var rj reservationJSON
	if res.ID != "" {
		rj = reservationJSON{ReservationID: res.ID, ReservationExpiresAt: res.ExpiresAt.UTC().Format(time.RFC3339Nano)}
	}
	writeCheck(w, single, allowed, results, rj)
	return nil
}

type settleBody struct {
	ReservationID string `json:"reservation_id"`
	Cost          *int64 `json:"cost"`
}

type settleResponse struct {
	ReservationID  string `json:"reservation_id"`
	Settled        bool   `json:"settled"`
	AlreadySettled bool   `json:"already_settled"`
}

func settle(rl Ratelimiter, w http.ResponseWriter, r *http.Request) error {
	ul, ok := rl.(UsageLimiter)
	if !ok {
		return apperr.New(apperr.Unavailable, "usage-based limits are not enabled on this server")
	}
	var body settleBody
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	if body.Cost == nil {
		return apperr.Fields(apperr.Invalid, "the settlement is invalid", []apperr.FieldError{{Field: "cost", Detail: "is required (0 releases the reservation)"}})
	}
	already, err := ul.Settle(r.Context(), body.ReservationID, *body.Cost)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, settleResponse{ReservationID: body.ReservationID, Settled: true, AlreadySettled: already})
	return nil
}
