package rlqs

import (
	"cmp"
	"slices"
	"time"
)

// Demand is one client's recent use of one bucket, as every node sees it.
type Demand struct {
	// Client names the client: one Envoy's stream, unique across nodes.
	Client string
	// Rate is the requests the client saw in the bucket (allowed and
	// denied) per period of the bucket's rule, over its recent reports.
	Rate float64
	// Expires is when the client's share is freed unless it reports again:
	// two report intervals after its last report.
	Expires time.Time
}

// DefaultMinFraction is the part of a limit set aside so that every
// reporting client, idle or new, has a share.
const DefaultMinFraction = 0.1

// Shares divides limit (requests per period) among the clients of demands
// that are live at now (Expires after now), and returns each live client's
// share. It is a pure function of its arguments:
//
//   - every live client gets a floor of limit×minFraction/n (n live
//     clients), so a new or idle client can start at once;
//   - the rest of the limit is filled max-min fairly by the demand above
//     the floor: clients wanting less than an equal part get all they
//     want, the others split what remains equally;
//   - whatever demand leaves over is split equally, so every client can
//     grow until its next report.
//
// The shares sum to limit (up to floating point rounding, which the
// callers round down), a client's share never falls when its own demand
// grows and the others' stay, and expired clients get nothing. A
// minFraction outside (0, 1] is taken as DefaultMinFraction.
func Shares(limit float64, demands []Demand, now time.Time, minFraction float64) map[string]float64 {
	if minFraction <= 0 || minFraction > 1 {
		minFraction = DefaultMinFraction
	}
	live := make([]Demand, 0, len(demands))
	seen := make(map[string]bool, len(demands))
	for _, d := range demands {
		if d.Expires.After(now) && !seen[d.Client] {
			seen[d.Client] = true
			live = append(live, d)
		}
	}
	out := make(map[string]float64, len(live))
	if len(live) == 0 || limit <= 0 {
		for _, d := range live {
			out[d.Client] = 0
		}
		return out
	}
	n := float64(len(live))
	floor := limit * minFraction / n
	rest := limit - floor*n
	// Water-fill the excess demands, smallest first; ties by client, so
	// every node computes the same shares from the same table.
	slices.SortFunc(live, func(a, b Demand) int {
		return cmp.Or(cmp.Compare(max(0, a.Rate-floor), max(0, b.Rate-floor)), cmp.Compare(a.Client, b.Client))
	})
	for i, d := range live {
		fair := rest / float64(len(live)-i)
		give := min(max(0, d.Rate-floor), fair)
		out[d.Client] = floor + give
		rest -= give
	}
	if rest > 0 {
		extra := rest / n
		for c := range out {
			out[c] += extra
		}
	}
	return out
}
