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
// (settled ones as tombstones for a minute), with their expiries in a
// min-heap so that dropping the expired costs O(log n) each, and counts
// the unsettled ones of each key and owner, so that their number is
// bounded (UsageOptions.MaxHolds, MaxOwnerHolds). It keeps at most max
// records in all (MemoryOptions.MaxHolds): when full, the oldest
// tombstones go first (a second settle of one then answers
// ErrReservationNotFound rather than Already), and a new reservation is
// refused only when every record is unsettled.
type holdTable struct {
	mu     sync.Mutex
	max    int
	m      map[string]*holdRec
	exps   expiryHeap
	counts map[string]int // unsettled, unexpired reservations per counter
	tombs  []string       // settled ids, oldest first; may hold ids gone since
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
	checks   []Check
	at       int64 // when it was taken (µs): the window a refund goes to
	mode     ChargeMode
	exp      int64
	settled  bool
	counters []string // what it counts toward while unsettled
	maxes    []int    // each counter's bound
}

// holdCounters returns the counters a reservation of checks by opts
// counts toward, and their bounds.
func holdCounters(checks []Check, opts UsageOptions) ([]string, []int) {
	perKey, perOwner := opts.HoldBounds()
	names := make([]string, 0, len(checks)+1)
	maxes := make([]int, 0, len(checks)+1)
	for _, c := range checks {
		names = append(names, "k\x00"+c.Policy.Name+"\x00"+c.Key)
		maxes = append(maxes, perKey)
	}
	if opts.Owner != "" {
		names = append(names, "o\x00"+opts.Owner)
		maxes = append(maxes, perOwner)
	}
	return names, maxes
}

// admit records r as id unless one of its counters is at its bound.
func (t *holdTable) admit(id string, r *holdRec, now int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]*holdRec)
		t.counts = make(map[string]int)
	}
	for len(t.exps) > 0 && t.exps[0].at <= now {
		e := heap.Pop(&t.exps).(expiry)
		if r, ok := t.m[e.id]; ok && r.exp <= now {
			delete(t.m, e.id)
			t.release(r)
		}
	}
	bound := cmp.Or(t.max, DefaultMaxStoreHolds)
	for len(t.tombs) > 0 {
		old, ok := t.m[t.tombs[0]]
		live := ok && old.settled
		if live && len(t.m) < bound {
			break
		}
		if live {
			delete(t.m, t.tombs[0])
		}
		t.tombs = t.tombs[1:]
	}
	if len(t.m) >= bound {
		return fmt.Errorf("%w: the store keeps %d reservations, its bound", ErrTooManyHolds, len(t.m))
	}
	for i, c := range r.counters {
		if t.counts[c] >= r.maxes[i] {
			return fmt.Errorf("%w: %d outstanding", ErrTooManyHolds, t.counts[c])
		}
	}
	for _, c := range r.counters {
		t.counts[c]++
	}
	t.m[id] = r
	heap.Push(&t.exps, expiry{at: r.exp, id: id})
	return nil
}

// release stops r counting toward its counters, once.
func (t *holdTable) release(r *holdRec) {
	for _, c := range r.counters {
		if t.counts[c]--; t.counts[c] <= 0 {
			delete(t.counts, c)
		}
	}
	r.counters = nil
}

// drop forgets id, a reservation refused after it was admitted.
func (t *holdTable) drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.m[id]; r != nil {
		delete(t.m, id)
		t.release(r)
	}
}

// claim marks id settled and returns it, or reports why not.
func (t *holdTable) claim(id string, now int64) (*holdRec, Settlement, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.m[id]
	switch {
	case r == nil || r.exp <= now:
		if r != nil {
			delete(t.m, id)
			t.release(r)
		}
		return nil, Settlement{}, fmt.Errorf("%w: %q", ErrReservationNotFound, id)
	case r.settled:
		return nil, Settlement{Already: true}, nil
	}
	r.settled = true
	t.release(r)
	out := *r
	// A tombstone from now on, so a second settle is known as one, kept a
	// minute at most.
	r.checks = nil
	t.tombs = append(t.tombs, id)
	if tomb := now + tombstoneMicros; tomb < r.exp {
		r.exp = tomb
		heap.Push(&t.exps, expiry{at: tomb, id: id})
	}
	return &out, Settlement{}, nil
}

// dryRunAll decides every check against its key as it stands at now
// (pps and refs as prepareAll gives them, locked), charging nothing, and
// reports whether all would pass.
func dryRunAll(checks []Check, pps []params, refs []ref, now int64) ([]Decision, bool) {
	out := make([]Decision, len(checks))
	all := true
	for i := range checks {
		st, _, _ := refs[i].load(&pps[i], now)
		v, _ := pps[i].step(&st, now, request{cost: checks[i].Cost, dry: true})
		out[i] = v.decision(pps[i].limit)
		all = all && v.allowed
	}
	return out, all
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
	if err := ValidateUsage(checks, UsageOptions{}, ChargeCall); err != nil {
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
	if err := ValidateUsage(checks, opts, HoldCall); err != nil {
		return Hold{}, err
	}
	if id == "" {
		return Hold{}, errors.New("ratelimit: a reservation needs an id")
	}
	now := s.micros()
	exp := now + micros(opts.ReservationTTL())
	rec := &holdRec{checks: copyChecks(checks), at: now, mode: cmp.Or(opts.Charge, ChargeNow), exp: exp}
	rec.counters, rec.maxes = holdCounters(checks, opts)
	if err := s.holds.admit(id, rec, now); err != nil {
		return Hold{}, err
	}
	pps, refs := s.prepareAll(checks)
	unlock := lockAll(refs)
	out, all := dryRunAll(checks, pps, refs, now)
	if all {
		// Every mode charges the estimate now, so that unsettled
		// reservations count toward the limit.
		for i := range checks {
			st, j, found := refs[i].load(&pps[i], now)
			_, exp := pps[i].step(&st, now, request{cost: checks[i].Cost, id: id})
			refs[i].store(&pps[i], j, found, &st, exp, now)
		}
	}
	unlock()
	if !all {
		s.holds.drop(id)
		return Hold{Decisions: out}, nil
	}
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
// Both modes charged the estimate at Hold; ChargeOnSettle differs only in
// giving a Fixed check's estimate back when settled with 0 (the outcome
// is not counted). usage.lua's settledelta is the same.
func settleDelta(lease, fixed bool, mode ChargeMode, est, cost int64) int64 {
	switch {
	case lease:
		return 0
	case fixed && mode == ChargeOnSettle && cost == 0:
		return -est
	case fixed:
		return 0
	}
	return cost - est
}
