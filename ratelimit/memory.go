package ratelimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryOptions configures a MemoryStore.
type MemoryOptions struct {
	// Now is the clock. If nil, time.Now is used. Times before the Unix
	// epoch count as the epoch.
	Now func() time.Time
	// Shards is the number of independently locked shards, rounded up to a
	// power of two. If 0, 16 × GOMAXPROCS (at least 64) is used.
	Shards int
}

// MemoryStore is a Store in this process's memory. It is safe for
// concurrent use; keys are spread over shards, each with its own lock, and
// a single-key check takes one shard lock and allocates nothing once the
// key exists.
//
// Memory is bounded by active keys: a key whose state is back to its full
// allowance (a full bucket, an expired window, an empty log) equals no
// state, and is treated as absent. Each shard deletes such keys when it has
// doubled in size since its last sweep, and rebuilds its map when that
// leaves it under a quarter of its peak, so a shard holds at most about
// twice the keys that were active at its last sweep, plus 64. Sweep removes
// them at once. A key costs about 150 bytes plus its name, and a
// sliding_window_log or concurrency key 32 bytes per distinct admission
// instant (at most Limit of them).
type MemoryStore struct {
	now    func() time.Time
	seed   maphash.Seed
	mask   uint64
	shards []shard
	leases atomic.Uint64
}

type mkey struct{ policy, key string }

type slot struct {
	alg Algorithm
	exp int64 // Unix µs at which st equals no state
	st  state
}

type shard struct {
	mu        sync.Mutex
	m         map[mkey]slot
	nextSweep int
	peak      int
	_         [64]byte // keep shards' locks on separate cache lines
}

const minSweep = 64

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(opts MemoryOptions) *MemoryStore {
	n := opts.Shards
	if n <= 0 {
		n = max(64, 16*runtime.GOMAXPROCS(0))
	}
	n = 1 << bits.Len(uint(n-1))
	s := &MemoryStore{now: opts.Now, seed: maphash.MakeSeed(), mask: uint64(n - 1), shards: make([]shard, n)}
	if s.now == nil {
		s.now = time.Now
	}
	for i := range s.shards {
		s.shards[i].m = make(map[mkey]slot)
		s.shards[i].nextSweep = minSweep
	}
	return s
}

// micros reads the clock in Unix microseconds.
func (s *MemoryStore) micros() int64 { return max(0, s.now().UnixMicro()) }

func (s *MemoryStore) shardIndex(key string) int { return int(maphash.String(s.seed, key) & s.mask) }

// load returns the live state of k, or a fresh one.
func (sh *shard) load(pp *params, k mkey, now int64) slot {
	sl, ok := sh.m[k]
	if !ok || sl.alg != pp.alg || sl.exp <= now {
		return slot{alg: pp.alg, st: pp.fresh(now)}
	}
	return sl
}

// store keeps sl, or deletes k when sl equals no state.
func (sh *shard) store(k mkey, sl slot, now int64) {
	if sl.exp <= now {
		delete(sh.m, k)
		return
	}
	sh.m[k] = sl
	if n := len(sh.m); n >= sh.nextSweep {
		sh.sweep(now)
	}
}

func (sh *shard) sweep(now int64) {
	sh.peak = max(sh.peak, len(sh.m))
	for k, sl := range sh.m {
		if sl.exp <= now {
			delete(sh.m, k)
		}
	}
	if n := len(sh.m); n < sh.peak/4 {
		m := make(map[mkey]slot, n)
		for k, sl := range sh.m {
			m[k] = sl
		}
		sh.m, sh.peak = m, n
	}
	sh.nextSweep = max(minSweep, 2*len(sh.m))
}

// Sweep deletes every key whose state equals no state.
func (s *MemoryStore) Sweep() {
	now := s.micros()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.peak = len(sh.m)
		sh.sweep(now)
		sh.mu.Unlock()
	}
}

// Len returns the number of keys held, including idle ones not yet swept.
func (s *MemoryStore) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// Allow implements Store.
func (s *MemoryStore) Allow(ctx context.Context, p *Policy, key string, cost int64) (Decision, error) {
	return s.allow(p, key, cost, "")
}

func (s *MemoryStore) allow(p *Policy, key string, cost int64, id string) (Decision, error) {
	pp, err := p.prepare()
	if err != nil {
		return Decision{}, err
	}
	if err := pp.checkCost(cost); err != nil {
		return Decision{}, err
	}
	now := s.micros()
	k := mkey{p.Name, key}
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	sl := sh.load(&pp, k, now)
	v, exp := pp.step(&sl.st, now, request{cost: cost, id: id})
	if v.allowed {
		sl.exp = exp
		sh.store(k, sl, now)
	}
	sh.mu.Unlock()
	return v.decision(pp.limit), nil
}

// AllowMulti implements Store.
func (s *MemoryStore) AllowMulti(ctx context.Context, checks []Check) ([]Decision, error) {
	pps := make([]params, len(checks))
	idx := make([]int, 0, len(checks))
	for i, c := range checks {
		if c.Policy == nil {
			return nil, fmt.Errorf("check %d: %w: no policy", i, ErrInvalidPolicy)
		}
		pp, err := c.Policy.prepare()
		if err != nil {
			return nil, fmt.Errorf("check %d: %w", i, err)
		}
		if err := pp.checkCost(c.Cost); err != nil {
			return nil, fmt.Errorf("check %d: %w", i, err)
		}
		for _, d := range checks[:i] {
			if d.Policy.Name == c.Policy.Name && d.Key == c.Key {
				return nil, fmt.Errorf("check %d: %w: policy %q key %q", i, ErrDuplicateCheck, c.Policy.Name, c.Key)
			}
		}
		pps[i] = pp
		idx = append(idx, s.shardIndex(c.Key))
	}
	shards := slices.Clone(idx)
	slices.Sort(shards)
	shards = slices.Compact(shards)
	for _, i := range shards {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for _, i := range shards {
			s.shards[i].mu.Unlock()
		}
	}()
	now := s.micros()
	out := make([]Decision, len(checks))
	all := true
	for i, c := range checks {
		sl := s.shards[idx[i]].load(&pps[i], mkey{c.Policy.Name, c.Key}, now)
		v, _ := pps[i].step(&sl.st, now, request{cost: c.Cost, dry: true})
		out[i] = v.decision(pps[i].limit)
		all = all && v.allowed
	}
	if !all {
		return out, nil
	}
	for i, c := range checks {
		k := mkey{c.Policy.Name, c.Key}
		sh := &s.shards[idx[i]]
		sl := sh.load(&pps[i], k, now)
		v, exp := pps[i].step(&sl.st, now, request{cost: c.Cost})
		sl.exp = exp
		sh.store(k, sl, now)
		out[i] = v.decision(pps[i].limit)
	}
	return out, nil
}

// Reserve implements Store.
func (s *MemoryStore) Reserve(ctx context.Context, p *Policy, key string, cost int64, maxWait time.Duration) (Reservation, error) {
	pp, err := p.prepare()
	if err != nil {
		return Reservation{}, err
	}
	if pp.alg != TokenBucket && pp.alg != GCRA {
		return Reservation{}, fmt.Errorf("%w: policy %q is %s", ErrReserveUnsupported, p.Name, p.Algorithm)
	}
	if err := pp.checkCost(cost); err != nil {
		return Reservation{}, err
	}
	now := s.micros()
	k := mkey{p.Name, key}
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	sl := sh.load(&pp, k, now)
	v, exp := pp.step(&sl.st, now, request{cost: cost, reserve: true, maxWait: micros(maxWait)})
	if v.allowed {
		sl.exp = exp
		sh.store(k, sl, now)
	}
	sh.mu.Unlock()
	return reservation(p, key, cost, now, v, pp.limit), nil
}

func reservation(p *Policy, key string, cost, now int64, v verdict, limit int64) Reservation {
	r := Reservation{OK: v.allowed, Decision: v.decision(limit), Policy: p, Key: key, Cost: cost}
	if v.allowed {
		r.Delay = time.Duration(v.delay) * time.Microsecond
		r.Until = now + v.delay
	}
	return r
}

// micros converts a duration to whole µs, saturating below 2^53.
func micros(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return min(int64(d/time.Microsecond), maxExact-1)
}

// CancelReservation implements Store.
func (s *MemoryStore) CancelReservation(ctx context.Context, r Reservation) error {
	if !r.OK || r.Policy == nil {
		return nil
	}
	pp, err := r.Policy.prepare()
	if err != nil || (pp.alg != TokenBucket && pp.alg != GCRA) {
		return err
	}
	now := s.micros()
	if now >= r.Until {
		return nil
	}
	k := mkey{r.Policy.Name, r.Key}
	sh := &s.shards[s.shardIndex(r.Key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sl := sh.load(&pp, k, now)
	lvl := min(pp.capacity, pp.level(&sl.st, now)+r.Cost*pp.unit)
	pp.setLevel(&sl.st, now, lvl)
	sl.exp = now + ceilDiv(pp.capacity-lvl, pp.rate)
	sh.store(k, sl, now)
	return nil
}

// Peek implements Store.
func (s *MemoryStore) Peek(ctx context.Context, p *Policy, key string) (Decision, error) {
	pp, err := p.prepare()
	if err != nil {
		return Decision{}, err
	}
	now := s.micros()
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	sl := sh.load(&pp, mkey{p.Name, key}, now)
	v := pp.peek(&sl.st, now)
	sh.mu.Unlock()
	return v.decision(pp.limit), nil
}

// Reset implements Store.
func (s *MemoryStore) Reset(ctx context.Context, p *Policy, key string) error {
	sh := &s.shards[s.shardIndex(key)]
	sh.mu.Lock()
	delete(sh.m, mkey{p.Name, key})
	sh.mu.Unlock()
	return nil
}

// Acquire implements Store.
func (s *MemoryStore) Acquire(ctx context.Context, p *Policy, key string, cost int64) (Lease, Decision, error) {
	if p.Algorithm != Concurrency {
		return Lease{}, Decision{}, fmt.Errorf("%w: policy %q is %s", ErrNotConcurrency, p.Name, p.Algorithm)
	}
	id := strconv.FormatUint(s.leases.Add(1), 36)
	d, err := s.allow(p, key, cost, id)
	if err != nil || !d.Allowed {
		return Lease{}, d, err
	}
	return Lease{Policy: p, Key: key, ID: id, Cost: cost}, d, nil
}

// Release implements Store.
func (s *MemoryStore) Release(ctx context.Context, l Lease) error {
	if l.Policy == nil || l.ID == "" {
		return nil
	}
	k := mkey{l.Policy.Name, l.Key}
	sh := &s.shards[s.shardIndex(l.Key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sl, ok := sh.m[k]
	if !ok || sl.alg != Concurrency {
		return nil
	}
	sl.st.q.remove(l.ID)
	if sl.st.q.len() == 0 {
		delete(sh.m, k)
	}
	return nil
}
