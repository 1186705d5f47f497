package ratelimit

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"
)

var _ UsageStore = (*MemoryStore)(nil)

// holdTable holds a MemoryStore's usage reservations until they expire
// (settled ones as tombstones for a minute), with
// their expiries in a min-heap so that dropping the expired costs
// O(log n) each.
type holdTable struct {
	mu   sync.Mutex
	m    map[string]*holdRec
	exps expiryHeap
}

// tombstoneMicros is how long a settled reservation is remembered (at
// most until it would have expired).
const tombstoneMicros = int64(time.Minute / time.Microsecond)

type expiry struct {
	at int64
	id string
}

type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type holdRec struct {
	checks  []Check
	at      int64 // when it was taken (µs): the window a refund goes to
	mode    ChargeMode
	exp     int64
	settled bool
}

func (t *holdTable) put(id string, r *holdRec, now int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]*holdRec)
	}
	for len(t.exps) > 0 && t.exps[0].at <= now {
		e := heap.Pop(&t.exps).(expiry)
		if r, ok := t.m[e.id]; ok && r.exp <= now {
			delete(t.m, e.id)
		}
	}
	t.m[id] = r
	heap.Push(&t.exps, expiry{at: r.exp, id: id})
}

// claim marks id settled and returns it, or reports why not.
func (t *holdTable) claim(id string, now int64) (*holdRec, Settlement, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.m[id]
	switch {
	case r == nil || r.exp <= now:
		delete(t.m, id)
		return nil, Settlement{}, fmt.Errorf("%w: %q", ErrReservationNotFound, id)
	case r.settled:
		return nil, Settlement{Already: true}, nil
	}
	r.settled = true
	out := *r
	// A tombstone from now on, so a second settle is known as one, kept a
	// minute at most.
	r.checks = nil
	if tomb := now + tombstoneMicros; tomb < r.exp {
		r.exp = tomb
		heap.Push(&t.exps, expiry{at: tomb, id: id})
	}
	return &out, Settlement{}, nil
}

// lockAll locks each shard of refs once, in address order, so concurrent
// multi-key operations cannot deadlock, and returns the unlock.
func lockAll(refs []ref) func() {
	locked := make([]*shard, len(refs))
	for i := range refs {
		locked[i] = refs[i].sh
	}
	slices.SortFunc(locked, func(a, b *shard) int { return cmp.Compare(uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b))) })
	locked = slices.Compact(locked)
	for _, sh := range locked {
		sh.mu.Lock()
	}
	return func() {
		for _, sh := range locked {
			sh.mu.Unlock()
		}
	}
}

func (s *MemoryStore) prepareAll(checks []Check) ([]params, []ref) {
	pps := make([]params, len(checks))
	refs := make([]ref, len(checks))
	for i, c := range checks {
		c.Policy.fill(&pps[i]) // validated
		refs[i] = s.locate(c.Policy.Name, c.Key)
	}
	return pps, refs
}

// Charge implements UsageStore.
func (s *MemoryStore) Charge(ctx context.Context, checks []Check) ([]Decision, error) {
	if err := ValidateUsage(checks, UsageOptions{}, true); err != nil {
		return nil, err
	}
	pps, refs := s.prepareAll(checks)
	defer lockAll(refs)()
	now := s.micros()
	out := make([]Decision, len(checks))
	for i, c := range checks {
		pp := &pps[i]
		if c.Cost > 0 {
			st, j, found := refs[i].load(pp, now)
			exp := pp.charge(&st, now, c.Cost, c.Policy.MaxDebt, "")
			refs[i].store(pp, j, found, &st, exp, now)
		}
		st, _, _ := refs[i].load(pp, now)
		out[i] = pp.peek(&st, now).decision(pp.limit)
	}
	return out, nil
}

// Hold implements UsageStore.
func (s *MemoryStore) Hold(ctx context.Context, id string, checks []Check, opts UsageOptions) (Hold, error) {
	if err := ValidateUsage(checks, opts, false); err != nil {
		return Hold{}, err
	}
	if id == "" {
		return Hold{}, errors.New("ratelimit: a reservation needs an id")
	}
	pps, refs := s.prepareAll(checks)
	unlock := lockAll(refs)
	now := s.micros()
	out := make([]Decision, len(checks))
	all := true
	for i := range checks {
		st, _, _ := refs[i].load(&pps[i], now)
		v, _ := pps[i].step(&st, now, request{cost: checks[i].Cost, dry: true})
		out[i] = v.decision(pps[i].limit)
		all = all && v.allowed
	}
	if all {
		for i := range checks {
			if opts.Charge == ChargeOnSettle && pps[i].code != codeConcurrency {
				continue
			}
			st, j, found := refs[i].load(&pps[i], now)
			_, exp := pps[i].step(&st, now, request{cost: checks[i].Cost, id: id})
			refs[i].store(&pps[i], j, found, &st, exp, now)
		}
	}
	unlock()
	if !all {
		return Hold{Decisions: out}, nil
	}
	exp := now + micros(opts.ReservationTTL())
	rec := &holdRec{checks: copyChecks(checks), at: now, mode: cmp.Or(opts.Charge, ChargeNow), exp: exp}
	s.holds.put(id, rec, now)
	return Hold{ID: id, Allowed: true, Decisions: out, ExpiresAt: time.UnixMicro(exp).UTC()}, nil
}

// copyChecks copies checks and their policies, so a reservation settles
// under the policies it was taken with.
func copyChecks(checks []Check) []Check {
	out := make([]Check, len(checks))
	for i, c := range checks {
		p := *c.Policy
		c.Policy = &p
		out[i] = c
	}
	return out
}

// Settle implements UsageStore.
func (s *MemoryStore) Settle(ctx context.Context, id string, cost int64) (Settlement, error) {
	if cost < 0 || cost >= maxExact {
		return Settlement{}, fmt.Errorf("%w: cost %d", ErrInvalidUsage, cost)
	}
	rec, set, err := s.holds.claim(id, s.micros())
	if rec == nil {
		return set, err
	}
	pps, refs := s.prepareAll(rec.checks)
	defer lockAll(refs)()
	now := s.micros()
	for i, c := range rec.checks {
		pp := &pps[i]
		delta := settleDelta(pp.code == codeConcurrency, c.Fixed, rec.mode, c.Cost, cost)
		if delta == 0 && pp.code != codeConcurrency {
			continue
		}
		st, j, found := refs[i].load(pp, now)
		var exp int64
		switch {
		case pp.code == codeConcurrency:
			st.q.remove(id)
			exp = st.q.newest()
		case delta > 0:
			exp = pp.charge(&st, now, delta, c.Policy.MaxDebt, id)
		default:
			exp = pp.refund(&st, now, -delta, rec.at, id)
		}
		refs[i].store(pp, j, found, &st, exp, now)
	}
	return Settlement{}, nil
}

// settleDelta is what settling a check of estimate est at cost charges
// (negative: refunds). Concurrency leases are released instead.
func settleDelta(lease, fixed bool, mode ChargeMode, est, cost int64) int64 {
	switch {
	case lease:
		return 0
	case mode == ChargeOnSettle && cost == 0:
		return 0
	case mode == ChargeOnSettle && fixed:
		return est
	case mode == ChargeOnSettle:
		return cost
	case fixed:
		return 0
	}
	return cost - est
}
