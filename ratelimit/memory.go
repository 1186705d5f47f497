package ratelimit

import (
	"cmp"
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
	"unsafe"
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
// A (policy, key) pair is identified by a 128-bit hash of both, keyed with
// a random seed per store, rather than by the strings: the table then holds
// no pointers (the garbage collector never scans it) and a check touches
// no memory but its own slot. Two pairs would share state only if both
// 64-bit halves collided, which for a billion live keys has odds below
// 2^-68, and the seed keeps clients from choosing keys that collide.
//
// Memory is bounded by active keys: a key whose state is back to its full
// allowance (a full bucket, an expired window, an empty log) equals no
// state, and is treated as absent. Each shard deletes such keys when it has
// doubled in size since its last sweep, and rebuilds its map when that
// leaves it under a quarter of its peak, so a shard holds at most about
// twice the keys that were active at its last sweep, plus 64; Sweep removes
// them at once. A key costs about 100 bytes (64 in the table, the rest
// slack), and a sliding_window_log or concurrency key also 32 bytes per
// distinct admission instant or lease (at most Limit of them).
type MemoryStore struct {
	now    func() time.Time
	seed   [2]maphash.Seed
	mask   uint64
	shards []shard
	leases atomic.Uint64
}

// hkey identifies a (policy, key) pair.
type hkey struct{ a, b uint64 }

// slot is the pointer-free part of a state.
type slot struct {
	code       uint8 // params.code
	exp        int64 // Unix µs at which the state equals no state
	a, b, c, t int64
}

type shard struct {
	mu        sync.Mutex
	m         map[hkey]slot
	q         map[hkey]*queue // sliding_window_log and concurrency entries
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
	s := &MemoryStore{now: opts.Now, seed: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, mask: uint64(n - 1), shards: make([]shard, n)}
	if s.now == nil {
		s.now = time.Now
	}
	for i := range s.shards {
		s.shards[i].m = make(map[hkey]slot)
		s.shards[i].q = make(map[hkey]*queue)
		s.shards[i].nextSweep = minSweep
	}
	return s
}

// micros reads the clock in Unix microseconds.
func (s *MemoryStore) micros() int64 { return max(0, s.now().UnixMicro()) }

// locate returns the pair's identity and its shard. Every policy of one key
// lives in one shard, so a multi-policy check on a key takes one lock.
func (s *MemoryStore) locate(policy, key string) (hkey, *shard) {
	ka, kb := maphash.String(s.seed[0], key), maphash.String(s.seed[1], key)
	pa, pb := maphash.String(s.seed[0], policy), maphash.String(s.seed[1], policy)
	return hkey{ka ^ pa*0x9E3779B97F4A7C15, kb ^ pb*0xC2B2AE3D27D4EB4F}, &s.shards[ka&s.mask]
}

// load returns the live state of k, or a fresh one.
func (sh *shard) load(pp *params, k hkey, now int64) state {
	sl, ok := sh.m[k]
	if !ok || sl.code != pp.code || sl.exp <= now {
		st := pp.fresh(now)
		if st.q != nil {
			if q := sh.q[k]; q != nil { // reuse the expired log's memory
				q.e, q.head, q.sum = q.e[:0], 0, 0
				st.q = q
			}
		}
		return st
	}
	st := state{a: sl.a, b: sl.b, c: sl.c, t: sl.t}
	if pp.alg == SlidingWindowLog || pp.alg == Concurrency {
		st.q = sh.q[k]
	}
	return st
}

// store keeps st until exp, or deletes k when st already equals no state.
func (sh *shard) store(pp *params, k hkey, st *state, exp, now int64) {
	if exp <= now {
		sh.remove(k)
		return
	}
	sh.m[k] = slot{code: pp.code, exp: exp, a: st.a, b: st.b, c: st.c, t: st.t}
	if st.q != nil {
		sh.q[k] = st.q
	}
	if n := len(sh.m); n >= sh.nextSweep {
		sh.sweep(now)
	}
}

func (sh *shard) remove(k hkey) {
	delete(sh.m, k)
	delete(sh.q, k)
}

func (sh *shard) sweep(now int64) {
	sh.peak = max(sh.peak, len(sh.m))
	for k, sl := range sh.m {
		if sl.exp <= now {
			sh.remove(k)
		}
	}
	if n := len(sh.m); n < sh.peak/4 {
		m := make(map[hkey]slot, n)
		for k, sl := range sh.m {
			m[k] = sl
		}
		q := make(map[hkey]*queue, len(sh.q))
		for k, v := range sh.q {
			q[k] = v
		}
		sh.m, sh.q, sh.peak = m, q, n
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

// Len returns the number of (policy, key) states held, including idle ones
// not yet swept.
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
	k, sh := s.locate(p.Name, key)
	sh.mu.Lock()
	st := sh.load(&pp, k, now)
	v, exp := pp.step(&st, now, request{cost: cost, id: id})
	if v.allowed {
		sh.store(&pp, k, &st, exp, now)
	}
	sh.mu.Unlock()
	return v.decision(pp.limit), nil
}

// AllowMulti implements Store.
func (s *MemoryStore) AllowMulti(ctx context.Context, checks []Check) ([]Decision, error) {
	pps := make([]params, len(checks))
	ks := make([]hkey, len(checks))
	shs := make([]*shard, len(checks))
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
		ks[i], shs[i] = s.locate(c.Policy.Name, c.Key)
	}
	// Lock each shard once, in address order, so concurrent multi-key
	// checks cannot deadlock.
	locked := slices.Clone(shs)
	slices.SortFunc(locked, func(a, b *shard) int { return cmp.Compare(uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b))) })
	locked = slices.Compact(locked)
	for _, sh := range locked {
		sh.mu.Lock()
	}
	defer func() {
		for _, sh := range locked {
			sh.mu.Unlock()
		}
	}()
	now := s.micros()
	out := make([]Decision, len(checks))
	all := true
	for i := range checks {
		st := shs[i].load(&pps[i], ks[i], now)
		v, _ := pps[i].step(&st, now, request{cost: checks[i].Cost, dry: true})
		out[i] = v.decision(pps[i].limit)
		all = all && v.allowed
	}
	if !all {
		return out, nil
	}
	for i := range checks {
		st := shs[i].load(&pps[i], ks[i], now)
		v, exp := pps[i].step(&st, now, request{cost: checks[i].Cost})
		shs[i].store(&pps[i], ks[i], &st, exp, now)
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
	k, sh := s.locate(p.Name, key)
	sh.mu.Lock()
	st := sh.load(&pp, k, now)
	v, exp := pp.step(&st, now, request{cost: cost, reserve: true, maxWait: micros(maxWait)})
	if v.allowed {
		sh.store(&pp, k, &st, exp, now)
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
	k, sh := s.locate(r.Policy.Name, r.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	st := sh.load(&pp, k, now)
	lvl := min(pp.capacity, pp.level(&st, now)+r.Cost*pp.unit)
	pp.setLevel(&st, now, lvl)
	sh.store(&pp, k, &st, now+ceilDiv(pp.capacity-lvl, pp.rate), now)
	return nil
}

// Peek implements Store.
func (s *MemoryStore) Peek(ctx context.Context, p *Policy, key string) (Decision, error) {
	pp, err := p.prepare()
	if err != nil {
		return Decision{}, err
	}
	now := s.micros()
	k, sh := s.locate(p.Name, key)
	sh.mu.Lock()
	st := sh.load(&pp, k, now)
	v := pp.peek(&st, now)
	sh.mu.Unlock()
	return v.decision(pp.limit), nil
}

// Reset implements Store.
func (s *MemoryStore) Reset(ctx context.Context, p *Policy, key string) error {
	k, sh := s.locate(p.Name, key)
	sh.mu.Lock()
	sh.remove(k)
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
	k, sh := s.locate(l.Policy.Name, l.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	q := sh.q[k]
	if q == nil {
		return nil
	}
	q.remove(l.ID)
	if q.len() == 0 {
		sh.remove(k)
	}
	return nil
}
