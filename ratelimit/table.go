package ratelimit

import (
	"math/bits"
	"sync"
	"unsafe"
)

// The shards' open-addressing table, its slots, sweeps and sizes: see the
// package doc, "Memory store: the table".

// slot is one (policy, key) state. code 0 marks an empty slot.
type slot struct {
	h, v       uint64 // identity (pairHash)
	exp        int64  // Unix µs at which the state equals no state
	a, b, c, t int64  // state, as in the struct state
	code       uint8  // params.code
	_          [7]byte
}

const minSlots = 16

// tooFull reports whether n entries fill size slots past 5/8, where the
// mean probe of linear probing is still under two slots.
func tooFull(n, size int) bool { return 8*n > 5*size }

type shard struct {
	mu    sync.Mutex
	slots []slot
	n     int                       // slots in use
	q     map[hkey]*queue           // sliding_window_log and concurrency entries
	pc    *[policySlots]policyEntry // made by the shard's first check
	_     [72]byte                  // keep shards' locks on separate cache lines (128 bytes a shard)
}

// policyEntry is a policy as prepared for checks: its params and the
// lanes of its name's hash. A shard keeps the policies it saw last in a
// small table (pc) indexed by the *Policy's address, read and written
// under the shard's lock; an entry serves a check only if it holds a
// policy equal to the check's (the caller may have changed it since), so
// preparing and hashing the policy again is left to the first check of
// each policy and to collisions. Preparing costs about as much as the
// rest of a check (docs/benchmarks.md, "Goal 6: the memory library").
type policyEntry struct {
	p      Policy
	pp     params
	ph, pv uint64
}

const policySlots = 8

// policySlot is the index of p's entry: its address, hashed so that
// policies side by side in a slice, 64 bytes apart, get different slots.
func policySlot(p *Policy) uint64 {
	return uint64(uintptr(unsafe.Pointer(p))) * wyp5 >> 61 // 61 = 64 - log2(policySlots)
}

// samePolicy is a == *b, cheaper than the generated comparison: a cached
// policy's strings are usually the check's own, so their data pointers
// are compared before their bytes.
func samePolicy(a, b *Policy) bool {
	return a.Limit == b.Limit && a.Period == b.Period && a.Burst == b.Burst && a.MaxDebt == b.MaxDebt &&
		sameString(a.Name, b.Name) && sameString(string(a.Algorithm), string(b.Algorithm))
}

// sameStrings is samePolicy for a b whose strings are a's own (the same
// bytes in memory), as when the entry was made from b: it reports false
// for other strings, equal or not, and samePolicy decides then.
func sameStrings(a, b *Policy) bool {
	// One test of the eight words' differences, not eight branches.
	return uint64(a.Limit^b.Limit)|uint64(a.Period^b.Period)|uint64(a.Burst^b.Burst)|uint64(a.MaxDebt^b.MaxDebt)|
		uint64(len(a.Name)^len(b.Name))|uint64(len(a.Algorithm)^len(b.Algorithm))|
		uint64(uintptr(unsafe.Pointer(unsafe.StringData(a.Name)))^uintptr(unsafe.Pointer(unsafe.StringData(b.Name))))|
		uint64(uintptr(unsafe.Pointer(unsafe.StringData(string(a.Algorithm))))^uintptr(unsafe.Pointer(unsafe.StringData(string(b.Algorithm))))) == 0
}

func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// prime fills e with p, or returns nil if p is invalid.
func (e *policyEntry) prime(p *Policy, sd hashSeed) *policyEntry {
	var pp params
	if !p.fill(&pp) {
		return nil
	}
	e.p, e.pp = *p, pp
	e.ph, e.pv = sd.policyLanes(p.Name)
	return e
}

// hkey identifies a (policy, key) pair in the side map of queues.
type hkey struct{ h, v uint64 }

func (sh *shard) init() {
	sh.slots = make([]slot, minSlots)
	sh.q = make(map[hkey]*queue)
}

// find returns the index of k's slot, or of the empty slot where it would
// go, and whether it was found.
func (sh *shard) find(h, v uint64) (int, bool) {
	mask := uint64(len(sh.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &sh.slots[i]
		if s.code == 0 {
			return int(i), false
		}
		if s.h == h && s.v == v {
			return int(i), true
		}
	}
}

// insert returns the index of an empty slot for (h, v), which must be
// absent, sweeping or resizing first if the table would be too full.
// The caller sets the slot's code (and so its use) and counts it in n.
func (sh *shard) insert(h, v uint64, i int, now int64) int {
	if tooFull(sh.n+1, len(sh.slots)) {
		sh.sweep(now)
		i, _ = sh.find(h, v)
	}
	return i
}

// remove empties slot i, shifting the rest of its cluster back so every
// entry stays reachable from its home slot.
func (sh *shard) remove(i int) {
	s := &sh.slots[i]
	if s.code == codeLog || s.code == codeConcurrency {
		delete(sh.q, hkey{s.h, s.v})
	}
	sh.n--
	mask := len(sh.slots) - 1
	for j := (i + 1) & mask; sh.slots[j].code != 0; j = (j + 1) & mask {
		// Entry j may move to the hole at i if its home is not cyclically
		// in (i, j].
		home := int(sh.slots[j].h) & mask
		if (j-home)&mask >= (j-i)&mask {
			sh.slots[i] = sh.slots[j]
			i = j
		}
	}
	sh.slots[i] = slot{}
}

// sweep deletes the idle states and resizes the table as described above.
func (sh *shard) sweep(now int64) {
	for i := 0; i < len(sh.slots); {
		if s := &sh.slots[i]; s.code != 0 && s.exp <= now {
			sh.remove(i) // may move an unvisited entry into i: look again
			continue
		}
		i++
	}
	size := len(sh.slots)
	switch {
	case 2*sh.n > size:
		size *= 2
	case 4*sh.n < size:
		size = max(minSlots, 1<<bits.Len(uint(2*sh.n-1)))
	}
	if size == len(sh.slots) {
		return
	}
	old := sh.slots
	sh.slots = make([]slot, size)
	for i := range old {
		if old[i].code != 0 {
			j, _ := sh.find(old[i].h, old[i].v)
			sh.slots[j] = old[i]
		}
	}
}
