package httplimit

import (
	"context"
	"slices"

	"github.com/sluicehq/sluice/ratelimit"
)

// lease decides checks that include a concurrency policy as a usage
// reservation, when the Store offers them (the memory and Redis stores
// do): the slots are then held while the request is served and freed when
// the response ends, rather than one Period later. The other checks are
// charged as usual (their cost is final). ok is false when checks hold no
// concurrency policy or the Store cannot reserve: decide as usual then.
func (m *Middleware) lease(ctx context.Context, checks []ratelimit.Check, held **ratelimit.UsageReservation) (ds []ratelimit.Decision, ok bool, err error) {
	if !slices.ContainsFunc(checks, func(c ratelimit.Check) bool { return c.Policy.Algorithm == ratelimit.Concurrency }) {
		return nil, false, nil
	}
	if _, usage := m.Store.(ratelimit.UsageStore); !usage {
		return nil, false, nil
	}
	r, err := ratelimit.ReserveUsage(ctx, m.Store, checks, ratelimit.UsageOptions{})
	if err != nil {
		return nil, true, err
	}
	if r.Allowed {
		*held = r
	}
	return r.Decisions, true, nil
}
