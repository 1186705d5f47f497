package ratelimit

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"
)

// MemoryOptions configures a MemoryStore.
type MemoryOptions struct {
	// Now is the clock. If nil, the store reads the wall clock once, when
	// it is made, and advances it by the runtime's monotonic clock: one
	// clock read per check instead of time.Now's two, exact to the
	// microsecond, and immune to steps of the wall clock (fixed windows
	// stay aligned to the wall clock as it was then). A store made inside
	// a testing/synctest bubble, where time.Now has no monotonic reading,
	// reads time.Now on every check instead, so it follows the bubble's
	// fake clock. Times before the Unix epoch count as the epoch.
	Now func() time.Time
	// Shards is the number of independently locked shards, rounded up to a
	// power of two. If 0, 16 × GOMAXPROCS (at least 64) is used.
	Shards int
	// MaxHolds bounds the usage reservations the store keeps at once,
	// unsettled ones and settled ones remembered for a minute alike, over
	// every key and owner; past it Hold answers ErrTooManyHolds (settled
	// ones are forgotten first). If 0, DefaultMaxStoreHolds.
	MaxHolds int
}

// DefaultMaxStoreHolds is MemoryOptions.MaxHolds when it is 0.
const DefaultMaxStoreHolds = 100_000

// MemoryStore is a Store in this process's memory. It is safe for
// concurrent use; keys are spread over shards, each with its own lock, and
// a single-key check takes one shard lock and allocates nothing once the
// key exists.
//
// A (policy, key) pair is identified by a 128-bit hash of both (two
// 64-bit lanes, keyed with random seeds per store; the key and the
// policy name are hashed apart and joined, so a check hashes only its key
// and takes the name's lanes from a per-shard cache of prepared
// policies), rather than by the strings: the table then holds no pointers
// (the garbage collector never scans it) and a check touches no memory
// but its own slot, one 64-byte cache line holding the identity and the
// state. Two pairs would share state only if both 64-bit lanes collided,
// which for a billion live keys has odds around 2^-69 (for keys that do
// not depend on the seeds), and the random seeds keep clients who cannot
// see them from choosing keys that collide (the hash is not a
// cryptographic MAC, and neither is maphash, which the store used
// before). The shard is chosen by a hash of the key alone, so every
// policy of one key lives in one shard.
//
// Memory is bounded by active keys: a key whose state is back to its full
// allowance (a full bucket, an expired window, an empty log) equals no
// state, and is treated as absent. Each shard deletes such keys when an
// insertion would fill its table past 5/8, and then shrinks the table if
// under a quarter of it is still in use, so a shard holds at most 2.5
// times the keys that were active at its last sweep (plus 10), in 64-byte
// slots of which at least a quarter are in use after a sweep: between
// about 100 and 256 bytes per active key. Sweep removes idle keys at
// once. A sliding_window_log or concurrency key also costs 32 bytes per
// distinct admission instant or lease (at most Limit of them), and a shard
// that has been checked keeps 1 KiB of prepared policies.
type MemoryStore struct {
	now       func() time.Time
	baseMono  int64 // nanotime() when the store was made, when now is nil
	baseNanos int64 // the wall clock then, in Unix ns (at least 0)
	seed      hashSeed
	short     [4]uint64 // the seed's lanes xor absorb's constants for a key's last block (Allow)
	shift     uint      // 63 - log2(len(shards)), for shardOf
	shards    []shard
	leases    atomic.Uint64
	holds     holdTable // usage reservations (usage_memory.go)
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(opts MemoryOptions) *MemoryStore {
	n := opts.Shards
	if n <= 0 {
		n = max(64, 16*runtime.GOMAXPROCS(0))
	}
	lg := bits.Len(uint(n - 1))
	s := &MemoryStore{now: opts.Now, shift: uint(63 - lg), shards: make([]shard, 1<<lg)}
	s.holds.max = cmp.Or(opts.MaxHolds, DefaultMaxStoreHolds)
	if s.now == nil {
		base := time.Now()
		s.baseMono, s.baseNanos = nanotime(), max(0, base.UnixNano())
		if base == base.Round(0) { // no monotonic reading: a synctest bubble
			s.now = time.Now
		}
	}
	var sd maphash.Hash // a random seed
	s.seed.h = sd.Sum64()
	sd.WriteByte(1)
	s.seed.v = sd.Sum64()
	s.short = [4]uint64{s.seed.h ^ wyp1, s.seed.h ^ wyp0, s.seed.v ^ wyp3, s.seed.v ^ wyp2}
	for i := range s.shards {
		s.shards[i].init()
	}
	return s
}

// micros reads the clock in Unix microseconds.
func (s *MemoryStore) micros() int64 {
	if s.now == nil {
		// nanotime never goes back, so the sum is at least baseNanos.
		return int64(uint64(s.baseNanos+nanotime()-s.baseMono) / 1000)
	}
	return s.nowMicros()
}

// nowMicros reads s.now, apart from micros so that micros is inlined.
func (s *MemoryStore) nowMicros() int64 { return max(0, s.now().UnixMicro()) }

// nanotime is the runtime's monotonic clock, which time.Since reads too
// (after checking for a synctest bubble, which NewMemoryStore does once):
// the runtime keeps it linkable for the packages that use it this way
// (go.dev/issue/67401).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// shardOf returns the shard of a key whose first lane is kh: its top
// log2(len(shards)) bits, shifted in two steps (one of 1, one of at most
// 63) so that a single shard is shard 0 and the compiler needs no test of
// the shift's size.
func (s *MemoryStore) shardOf(kh uint64) *shard { return &s.shards[kh>>1>>(s.shift&63)] }

// ref is a located (policy, key) pair.
type ref struct {
	h, v uint64
	sh   *shard
}

func (s *MemoryStore) locate(policy, key string) ref {
	h, v, kh := s.seed.pairHash(policy, key)
	return ref{h, v, s.shardOf(kh)}
}

// load returns the live state of r, or a fresh one, with the slot index
// where it is or would go and whether that slot holds r.
func (r ref) load(pp *params, now int64) (st state, i int, found bool) {
	sh := r.sh
	i, found = sh.find(r.h, r.v)
	sl := &sh.slots[i]
	if !found || sl.code != pp.code || sl.exp <= now {
		st = pp.fresh(now)
		if st.q != nil && found && sl.code == pp.code {
			if q := sh.q[hkey{r.h, r.v}]; q != nil { // reuse the expired log's memory
				q.e, q.head, q.sum = q.e[:0], 0, 0
				st.q = q
			}
		}
		return st, i, found
	}
	st = state{a: sl.a, b: sl.b, c: sl.c, t: sl.t}
	if pp.code == codeLog || pp.code == codeConcurrency {
		st.q = sh.q[hkey{r.h, r.v}]
	}
	return st, i, found
}

// store keeps st in slot i (as found by load) until exp, or deletes it
// when st already equals no state.
func (r ref) store(pp *params, i int, found bool, st *state, exp, now int64) {
	sh := r.sh
	if exp <= now {
		if found {
			sh.remove(i)
		}
		return
	}
	if !found {
		i = sh.insert(r.h, r.v, i, now)
		sh.n++
	} else if c := sh.slots[i].code; c != pp.code && (c == codeLog || c == codeConcurrency) {
		delete(sh.q, hkey{r.h, r.v})
	}
	sl := &sh.slots[i]
	sl.h, sl.v, sl.code = r.h, r.v, pp.code
	sl.exp, sl.a, sl.b, sl.c, sl.t = exp, st.a, st.b, st.c, st.t
	if st.q != nil {
		sh.q[hkey{r.h, r.v}] = st.q
	}
}

// Sweep deletes every key whose state equals no state.
func (s *MemoryStore) Sweep() {
	now := s.micros()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
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
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}

// Allow implements Store.
//
// The buckets' common case, a live key and an allowed check, is written
// out here (see docs/benchmarks.md, "Goal 6: the memory library"): the policy's params
// and name hash come from the shard's policy cache, only the key is
// hashed, and the state is updated in its slot. Everything else (a new
// or idle key, a refusal, the other algorithms, a policy not cached or
// not the cached one's strings) goes on to allowLocked.
func (s *MemoryStore) Allow(ctx context.Context, p *Policy, key string, cost int64) (Decision, error) {
	var kh, kv uint64
	if n := len(key); uint(n-8) <= 8 {
		// keyLanes for a key of 8 to 16 bytes (most keys), which absorb
		// reads as two words, written out here to save the call.
		k := unsafe.Pointer(unsafe.StringData(key))
		a, b := load64(k, 0), load64(k, n-8)^uint64(n)*wyp5
		kh, kv = wymix(a^s.short[0], b^s.short[1]), wymix(a^s.short[2], b^s.short[3])
	} else {
		kh, kv = s.seed.keyLanes(key)
	}
	// The clock after the hash, not before it: the clock read waits for
	// the loads before it (the vDSO orders its TSC read), so read first it
	// cost more per check at 100k keys with nearly the same instructions
	// (docs/benchmarks.md, "Where the instructions go").
	var now int64 // micros, inlined
	if s.now == nil {
		now = int64(uint64(s.baseNanos+nanotime()-s.baseMono) / 1000)
	} else {
		now = s.nowMicros()
	}
	sh := s.shardOf(kh)
	sh.mu.Lock()
	if pc := sh.pc; pc != nil {
		e := &pc[policySlot(p)]
		pp := &e.pp
		// pp.code-1 < codeGCRA: a bucket; uint64(cost-1) < limit: 1 <= cost <= limit.
		if pp.code-1 >= codeGCRA || uint64(cost-1) >= uint64(pp.limit) || !sameStrings(&e.p, p) {
			goto general
		}
		// find, for a live slot that holds (h, v): an empty slot cannot
		// (its code is 0), so the identity is compared first.
		h, v := s.seed.join(kh, kv, e.ph, e.pv)
		mask := uint64(len(sh.slots) - 1)
		i := h & mask
		sl := &sh.slots[i]
		for sl.h != h || sl.v != v {
			if sl.code == 0 {
				goto general
			}
			i = (i + 1) & mask
			sl = &sh.slots[i]
		}
		if sl.code != pp.code || sl.exp <= now {
			goto general
		}
		// take and setLevel on the slot in place. The divisions are
		// unsigned (the operands are not negative), and gcra's quotient
		// and remainder come from one division.
		var lvl int64
		t := sl.t // max(now, sl.t), as setLevel keeps it
		if pp.code == codeTokenBucket {
			lvl = sl.a
			if elapsed := now - t; elapsed > 0 {
				lvl, t = pp.capacity, now
				if hi, lo := bits.Mul64(uint64(elapsed), uint64(pp.rate)); hi == 0 && lo < maxExact {
					lvl = min(lvl, sl.a+int64(lo))
				}
			}
		} else if d := sl.a - now; d >= 0 {
			lvl = pp.capacity - (d*pp.rate + sl.b)
		} else {
			lvl = pp.capacity
		}
		after := lvl - cost*pp.unit
		if after < 0 { // refused: bucket explains why
			goto general
		}
		debt, rate := uint64(pp.capacity-after), uint64(pp.rate) // debt > 0: cost >= 1
		var reset uint64
		if pp.code == codeTokenBucket {
			reset = (debt + rate - 1) / rate
			sl.a, sl.t = after, t
		} else {
			q, m := debt/rate, debt%rate
			sl.a, sl.b, reset = now+int64(q), int64(m), q
			if m != 0 {
				reset++
			}
		}
		sl.exp = now + int64(reset) // > now: reset >= 1
		limit, remaining := pp.limit, int64(uint64(after)/uint64(pp.unit))
		sh.mu.Unlock()
		return Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: time.Duration(reset) * time.Microsecond}, nil
	}
general:
	// allowLocked fills d through a pointer: a struct of five fields
	// goes through memory anyway, and returning it from allowLocked cost
	// Allow 5 instructions more per check, on its fast path too.
	var d Decision
	err := s.allowLocked(&d, sh, p, kh, kv, now, cost, "")
	return d, err
}

// allow is Allow, and Acquire with the lease id, without Allow's fast path.
func (s *MemoryStore) allow(p *Policy, key string, cost int64, id string) (Decision, error) {
	kh, kv := s.seed.keyLanes(key)
	sh := s.shardOf(kh)
	now := s.micros()
	sh.mu.Lock()
	var d Decision
	err := s.allowLocked(&d, sh, p, kh, kv, now, cost, id)
	return d, err
}

// allowLocked is the rest of allow, on the shard sh of the key with lanes
// kh and kv, which the caller has locked; it unlocks it, and sets *d.
func (s *MemoryStore) allowLocked(d *Decision, sh *shard, p *Policy, kh, kv uint64, now, cost int64, id string) error {
	if sh.pc == nil { // the shard's first check
		sh.pc = new([policySlots]policyEntry)
	}
	e := &sh.pc[policySlot(p)] // see policyEntry
	if e.pp.code == 0 || !samePolicy(&e.p, p) {
		e = e.prime(p, s.seed)
	}
	if e == nil || cost < 1 || cost > e.pp.limit {
		sh.mu.Unlock()
		return policyError(p, cost)
	}
	pp := &e.pp
	h, v := s.seed.join(kh, kv, e.ph, e.pv)
	var vd verdict
	if pp.code <= codeGCRA {
		i, found := sh.find(h, v)
		sl := &sh.slots[i]
		var st state
		live := found && sl.code == pp.code && sl.exp > now
		switch {
		case live:
			st = state{a: sl.a, b: sl.b, t: sl.t}
		case pp.code == codeTokenBucket:
			st = state{a: pp.capacity, t: now}
		}
		if rem, reset, lvl := pp.take(&st, now, cost); lvl >= 0 {
			vd = verdict{allowed: true, remaining: rem, reset: reset}
			pp.setLevel(&st, now, lvl)
			if exp := now + vd.reset; live && exp > now {
				sl.exp, sl.a, sl.b, sl.t = exp, st.a, st.b, st.t
			} else {
				ref{h, v, sh}.store(pp, i, found, &st, exp, now)
			}
		} else {
			vd, _ = pp.bucket(&st, now, cost, false, 0)
		}
	} else {
		r := ref{h, v, sh}
		st, i, found := r.load(pp, now)
		var exp int64
		vd, exp = pp.step(&st, now, request{cost: cost, id: id})
		if vd.allowed {
			r.store(pp, i, found, &st, exp, now)
		}
	}
	limit := pp.limit
	sh.mu.Unlock()
	*d = vd.decision(limit)
	return nil
}

// policyError is the error of a check of cost under p that the policy
// cache refused: p is invalid, or cost is out of its range.
func policyError(p *Policy, cost int64) error {
	pp, err := p.prepare()
	if err != nil {
		return err
	}
	return pp.checkCost(cost)
}

// AllowMulti implements Store.
func (s *MemoryStore) AllowMulti(ctx context.Context, checks []Check) ([]Decision, error) {
	pps := make([]params, len(checks))
	refs := make([]ref, len(checks))
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
		refs[i] = s.locate(c.Policy.Name, c.Key)
	}
	defer lockAll(refs)()
	now := s.micros()
	out, all := dryRunAll(checks, pps, refs, now)
	if !all {
		// Nothing is charged: the checks that would pass report their
		// keys as they are (see uncharged).
		for i := range checks {
			if out[i].Allowed {
				st, _, _ := refs[i].load(&pps[i], now)
				out[i].Remaining, out[i].ResetAfter = uncharged(pps[i].peek(&st, now))
			}
		}
		return out, nil
	}
	// Load again: storing one check may move the slots of the others.
	for i := range checks {
		st, j, found := refs[i].load(&pps[i], now)
		v, exp := pps[i].step(&st, now, request{cost: checks[i].Cost})
		refs[i].store(&pps[i], j, found, &st, exp, now)
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
	if pp.code != codeTokenBucket && pp.code != codeGCRA {
		return Reservation{}, fmt.Errorf("%w: policy %q is %s", ErrReserveUnsupported, p.Name, p.Algorithm)
	}
	if err := pp.checkCost(cost); err != nil {
		return Reservation{}, err
	}
	r := s.locate(p.Name, key)
	now := s.micros()
	r.sh.mu.Lock()
	st, i, found := r.load(&pp, now)
	v, exp := pp.step(&st, now, request{cost: cost, reserve: true, maxWait: micros(maxWait)})
	if v.allowed {
		r.store(&pp, i, found, &st, exp, now)
	}
	r.sh.mu.Unlock()
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
	if err != nil || (pp.code != codeTokenBucket && pp.code != codeGCRA) {
		return err
	}
	now := s.micros()
	if now >= r.Until {
		return nil
	}
	ref := s.locate(r.Policy.Name, r.Key)
	ref.sh.mu.Lock()
	defer ref.sh.mu.Unlock()
	st, i, found := ref.load(&pp, now)
	lvl := min(pp.capacity, pp.level(&st, now)+r.Cost*pp.unit)
	pp.setLevel(&st, now, lvl)
	ref.store(&pp, i, found, &st, now+ceilDiv(pp.capacity-lvl, pp.rate), now)
	return nil
}

// Peek implements Store.
func (s *MemoryStore) Peek(ctx context.Context, p *Policy, key string) (Decision, error) {
	pp, err := p.prepare()
	if err != nil {
		return Decision{}, err
	}
	r := s.locate(p.Name, key)
	now := s.micros()
	r.sh.mu.Lock()
	st, _, _ := r.load(&pp, now)
	v := pp.peek(&st, now)
	r.sh.mu.Unlock()
	return v.decision(pp.limit), nil
}

// Reset implements Store.
func (s *MemoryStore) Reset(ctx context.Context, p *Policy, key string) error {
	r := s.locate(p.Name, key)
	r.sh.mu.Lock()
	if i, found := r.sh.find(r.h, r.v); found {
		r.sh.remove(i)
	}
	r.sh.mu.Unlock()
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
	r := s.locate(l.Policy.Name, l.Key)
	r.sh.mu.Lock()
	defer r.sh.mu.Unlock()
	i, found := r.sh.find(r.h, r.v)
	q := r.sh.q[hkey{r.h, r.v}]
	if !found || q == nil {
		return nil
	}
	q.remove(l.ID)
	if q.len() == 0 {
		r.sh.remove(i)
	}
	return nil
}
