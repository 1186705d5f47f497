package ratelimit

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// The pairs' 128-bit hash (absorb, pairHash): see the package doc,
// "Memory store: the hash".

const (
	wyp0 = 0xa0761d6478bd642f
	wyp1 = 0xe7037ed1a0b428db
	wyp2 = 0x8ebc6af09c88c6e3
	wyp3 = 0x589965cc75374cc3
	wyp4 = 0x1d8e4e27c47d124f
	wyp5 = 0x9e3779b97f4a7c15
)

func wymix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// hashSeed keys pairHash.
type hashSeed struct{ h, v uint64 }

// load64 and load32 read little-endian words at p+off; callers keep them
// inside the string.
func load64(p unsafe.Pointer, off int) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(p, off))[:])
}

func load32(p unsafe.Pointer, off int) uint64 {
	return uint64(binary.LittleEndian.Uint32((*[4]byte)(unsafe.Add(p, off))[:]))
}

// absorb folds s into the lanes h and v.
func absorb(h, v uint64, s string) (uint64, uint64) {
	p := unsafe.Pointer(unsafe.StringData(s))
	n := len(s)
	m := n
	for ; m > 16; m -= 16 {
		a, b := load64(p, 0), load64(p, 8)
		h = wymix(a^h^wyp1, b^h^wyp2)
		v = wymix(a^v^wyp3, b^v^wyp4)
		p = unsafe.Add(p, 16)
	}
	// The last 0 to 16 bytes, read as wyhash does: two overlapping words,
	// which with the length determine the bytes.
	var a, b uint64
	switch {
	case m >= 8:
		a, b = load64(p, 0), load64(p, m-8)
	case m >= 4:
		a = load32(p, 0)<<32 | load32(p, m-4)
	case m > 0:
		bs := unsafe.Slice((*byte)(p), m)
		a = uint64(bs[0])<<16 | uint64(bs[m>>1])<<8 | uint64(bs[m-1])
	}
	b ^= uint64(n) * wyp5
	h = wymix(a^h^wyp1, b^h^wyp0)
	v = wymix(a^v^wyp3, b^v^wyp2)
	return h, v
}

// pairHash returns the 128-bit identity (h, v) of (policy, key), and kh,
// a hash of key alone, which picks the shard: every policy of one key
// lives in one shard, so a multi-policy check on one key takes one lock.
//
// The key and the policy name are hashed apart, each with its length, and
// the two pairs of lanes then joined (join): a check finds the policy's
// lanes in its shard's policy cache (policyEntry) and hashes only the key.
func (sd hashSeed) pairHash(policy, key string) (h, v, kh uint64) {
	kh, kv := sd.keyLanes(key)
	ph, pv := sd.policyLanes(policy)
	h, v = sd.join(kh, kv, ph, pv)
	return h, v, kh
}

// keyLanes hashes key; its first lane is kh.
func (sd hashSeed) keyLanes(key string) (uint64, uint64) { return absorb(sd.h, sd.v, key) }

// policyLanes hashes a policy name, on lanes seeded apart from the key's.
func (sd hashSeed) policyLanes(policy string) (uint64, uint64) {
	return absorb(sd.h^wyp4, sd.v^wyp1, policy)
}

// join folds a key's lanes and a policy's into the pair's identity, lane
// by lane with xor: each lane is already a keyed hash of its string, so
// two pairs share an identity only if both lanes of the keys' xor equal
// both lanes of the names' xor, the odds of a 128-bit collision, and the
// identity's low bits (the slot) stay independent of the key's top bits
// (the shard).
func (sd hashSeed) join(kh, kv, ph, pv uint64) (h, v uint64) { return kh ^ ph, kv ^ pv }
