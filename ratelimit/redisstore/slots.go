package redisstore

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/sluicehq/sluice/ratelimit"
)

// step is the checks of a multi-key check that lie in one Cluster slot,
// run as one script call.
type step struct {
	c   *call
	pos []int // each check's index in the multi-key check
}

// steps groups checks by Cluster slot, in ascending slot order, keeping
// the checks' order within a slot.
func (s *Store) steps(checks []ratelimit.Check) []step {
	var steps []step
	for i, ch := range checks {
		name := s.keyName(ch.Policy, ch.Key)
		slot := s.slot(name)
		j := slices.IndexFunc(steps, func(st step) bool { return st.c.slot == slot })
		if j < 0 {
			j = len(steps)
			steps = append(steps, step{c: newCall("a", len(checks))})
		}
		st := &steps[j]
		st.c.slot = slot
		st.c.keys = append(st.c.keys, name)
		st.c.checks = append(st.c.checks, check{policy: ch.Policy, cost: strconv.FormatInt(ch.Cost, 10), extra: s.entryID(ch.Policy)})
		st.pos = append(st.pos, i)
	}
	slices.SortFunc(steps, func(a, b step) int { return cmp.Compare(a.c.slot, b.c.slot) })
	return steps
}

// decide copies the step's decisions into out.
func (st step) decide(out []ratelimit.Decision) {
	for i, p := range st.pos {
		out[p] = st.c.decision(i)
	}
}

// again returns a call of code on the step's checks.
func (st step) again(code string) *call {
	c := &call{code: code, keys: st.c.keys, slot: st.c.slot, checks: slices.Clone(st.c.checks)}
	if code == "u" {
		// The windows refund the charge of the window it was made in.
		now := strconv.FormatInt(st.c.now, 10)
		for i, ch := range c.checks {
			if a := ch.policy.Algorithm; a == ratelimit.FixedWindow || a == ratelimit.SlidingWindowCounter {
				c.checks[i].extra = now
			}
		}
	}
	return c
}

// allowSlots runs a multi-key check whose keys lie in several Cluster
// slots: one step per slot, in ascending slot order (so two checks sharing
// slots always meet them in the same order), each step charging its checks
// only if all of them fit. When a step refuses, the steps before it are
// refunded (whatever ctx says: they must not stay charged) and the steps
// after it evaluated without charging, then the refunded ones too, so that
// every check gets its own decision, of its key as it is (nothing was
// charged), before allowSlots returns. When a step fails, the steps before
// it are refunded as far as the server answers and the error is returned;
// the failed step is left alone, since whether it charged is unknown (a
// charge that stays costs allowance, never admits too much).
func (s *Store) allowSlots(ctx context.Context, steps []step, out []ratelimit.Decision) error {
	for i, st := range steps {
		if err := s.do(ctx, st.c); err != nil {
			_ = s.doAll(context.WithoutCancel(ctx), refunds(steps[:i]))
			return err
		}
		st.decide(out)
		if st.c.reply[0] == 1 {
			continue
		}
		later := steps[i+1:]
		evals := make([]*call, len(later))
		for j, l := range later {
			evals[j] = l.again("e")
		}
		// Once refunded, the steps before report their keys as they are
		// again, uncharged (an 'e' call), like the steps after; if that
		// fails they keep their decisions, which counted the charge.
		var early []*call
		var wg sync.WaitGroup
		wg.Go(func() {
			if s.doAll(context.WithoutCancel(ctx), refunds(steps[:i])) != nil {
				return
			}
			calls := make([]*call, i)
			for j, e := range steps[:i] {
				calls[j] = e.again("e")
			}
			if s.doAll(ctx, calls) == nil {
				early = calls
			}
		})
		err := s.doAll(ctx, evals)
		wg.Wait()
		if err != nil {
			return err
		}
		for j, e := range early {
			step{c: e, pos: steps[j].pos}.decide(out)
		}
		for j, l := range later {
			step{c: evals[j], pos: l.pos}.decide(out)
		}
		return nil
	}
	return nil
}

// refunds returns the refunds of steps, which were allowed.
func refunds(steps []step) []*call {
	calls := make([]*call, len(steps))
	for i, st := range steps {
		calls[i] = st.again("u")
	}
	return calls
}

// doAll runs calls at once and returns their errors.
func (s *Store) doAll(ctx context.Context, calls []*call) error {
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { errs[i] = s.do(ctx, c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
