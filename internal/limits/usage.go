package limits

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/ratelimit"
)

// Usage-based limits through the store wrappers: HotKeys passes them
// through, Failover decides them on Primary and, while it is down, on the
// local limiters.

var (
	_ ratelimit.UsageStore = (*HotKeys)(nil)
	_ ratelimit.UsageStore = (*Failover)(nil)
)

func usageOf(s ratelimit.Store) (ratelimit.UsageStore, error) {
	us, ok := s.(ratelimit.UsageStore)
	if !ok {
		return nil, ratelimit.ErrUsageUnsupported
	}
	return us, nil
}

// Charge implements ratelimit.UsageStore. A charge can only make a
// remembered refusal more right, so none is forgotten.
func (h *HotKeys) Charge(ctx context.Context, checks []ratelimit.Check) ([]ratelimit.Decision, error) {
	us, err := usageOf(h.next)
	if err != nil {
		return nil, err
	}
	return us.Charge(ctx, checks)
}

// Hold implements ratelimit.UsageStore.
func (h *HotKeys) Hold(ctx context.Context, id string, checks []ratelimit.Check, opts ratelimit.UsageOptions) (ratelimit.Hold, error) {
	us, err := usageOf(h.next)
	if err != nil {
		return ratelimit.Hold{}, err
	}
	return us.Hold(ctx, id, checks, opts)
}

// Settle implements ratelimit.UsageStore. A refund may lift a remembered
// refusal before its RetryAfter; it is kept (a refusal at most until then).
func (h *HotKeys) Settle(ctx context.Context, id string, cost int64) (ratelimit.Settlement, error) {
	us, err := usageOf(h.next)
	if err != nil {
		return ratelimit.Settlement{}, err
	}
	return us.Settle(ctx, id, cost)
}

// localID marks the ids of reservations taken on the local limiters.
const localID = "local-"

func (f *Failover) localChecks(checks []ratelimit.Check) []ratelimit.Check {
	out := make([]ratelimit.Check, len(checks))
	for i, c := range checks {
		c.Policy = f.localPolicy(c.Policy)
		out[i] = c
	}
	return out
}

// Charge implements ratelimit.UsageStore; while Primary is down the
// charge goes to the local limiters.
func (f *Failover) Charge(ctx context.Context, checks []ratelimit.Check) ([]ratelimit.Decision, error) {
	var ds []ratelimit.Decision
	if ok, err := f.primary(ctx, func(ctx context.Context) error {
		us, err := usageOf(f.shared())
		if err == nil {
			ds, err = us.Charge(ctx, checks)
		}
		return err
	}); ok {
		return ds, err
	}
	if err := ratelimit.ValidateUsage(checks, ratelimit.UsageOptions{}, ratelimit.ChargeCall); err != nil {
		return nil, err
	}
	return f.local.Charge(ctx, f.localChecks(checks))
}

// Hold implements ratelimit.UsageStore; while Primary is down the
// reservation is taken on this node's local limiters (its id starts with
// "local-", and only this node can settle it). Fail-closed policies refuse.
func (f *Failover) Hold(ctx context.Context, id string, checks []ratelimit.Check, opts ratelimit.UsageOptions) (ratelimit.Hold, error) {
	var h ratelimit.Hold
	if ok, err := f.primary(ctx, func(ctx context.Context) error {
		us, err := usageOf(f.shared())
		if err == nil {
			h, err = us.Hold(ctx, id, checks, opts)
		}
		return err
	}); ok {
		return h, err
	}
	if err := ratelimit.ValidateUsage(checks, opts, ratelimit.HoldCall); err != nil {
		return ratelimit.Hold{}, err
	}
	local := f.localChecks(checks)
	for i, c := range checks {
		if f.opts.FailsClosed(c.Policy.Name) {
			h.Decisions = make([]ratelimit.Decision, len(checks))
			for j, c := range checks {
				h.Decisions[j] = f.closed(c.Policy)
			}
			return h, nil
		}
		f.opts.Metrics.fellBack(c.Policy.Name, FailOpen)
		local[i].Cost = min(c.Cost, local[i].Policy.MaxCost())
	}
	return f.local.Hold(ctx, localID+id, local, opts)
}

// Settle implements ratelimit.UsageStore. A reservation on Primary that
// cannot be settled because Primary is down keeps its estimate, as if it
// had expired, and Settle says so with ErrReservationNotFound.
func (f *Failover) Settle(ctx context.Context, id string, cost int64) (ratelimit.Settlement, error) {
	if strings.HasPrefix(id, localID) {
		return f.local.Settle(ctx, id, cost)
	}
	var s ratelimit.Settlement
	ok, err := f.primary(ctx, func(ctx context.Context) error {
		us, err := usageOf(f.shared())
		if err == nil {
			s, err = us.Settle(ctx, id, cost)
		}
		return err
	})
	if !ok {
		if cost < 0 {
			return s, fmt.Errorf("%w: cost %d", ratelimit.ErrInvalidUsage, cost)
		}
		return s, fmt.Errorf("%w: %q: the rate limit store is unavailable, the estimate is kept", ratelimit.ErrReservationNotFound, id)
	}
	return s, err
}

// Charge implements ratelimit.UsageStore: usage calls go to the store
// behind, exactly, as multi-key checks do; a key's local share learns of
// them at its next sync.
func (s *LocalSync) Charge(ctx context.Context, checks []ratelimit.Check) ([]ratelimit.Decision, error) {
	us, err := usageOf(s.next)
	if err != nil {
		return nil, err
	}
	return us.Charge(ctx, checks)
}

// Hold implements ratelimit.UsageStore (see Charge).
func (s *LocalSync) Hold(ctx context.Context, id string, checks []ratelimit.Check, opts ratelimit.UsageOptions) (ratelimit.Hold, error) {
	us, err := usageOf(s.next)
	if err != nil {
		return ratelimit.Hold{}, err
	}
	return us.Hold(ctx, id, checks, opts)
}

// Settle implements ratelimit.UsageStore (see Charge).
func (s *LocalSync) Settle(ctx context.Context, id string, cost int64) (ratelimit.Settlement, error) {
	us, err := usageOf(s.next)
	if err != nil {
		return ratelimit.Settlement{}, err
	}
	return us.Settle(ctx, id, cost)
}
