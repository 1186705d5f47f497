package ratelimit

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestShardTable checks the open-addressing table against a map over
// random insertions, updates, deletions and sweeps, with identities whose
// home slots crowd together so clusters form and wrap around.
func TestShardTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var sh shard
	sh.init()
	model := map[hkey]int64{} // identity -> exp
	now := int64(1000)
	for step := range 200_000 {
		k := hkey{h: rng.Uint64N(64) << 1, v: rng.Uint64N(8)}
		if rng.IntN(4) == 0 {
			k.h |= 1 << 60 // same home slots, different identity
		}
		switch op := rng.IntN(10); {
		case op < 6: // store with an expiry around now
			exp := now + rng.Int64N(200) - 50
			i, found := sh.find(k.h, k.v)
			_, inModel := model[k]
			if found != inModel {
				t.Fatalf("step %d: find(%v) = %v, model has it: %v", step, k, found, inModel)
			}
			if !found && exp > now && tooFull(sh.n+1, len(sh.slots)) {
				for k, exp := range model { // insert sweeps first
					if exp <= now {
						delete(model, k)
					}
				}
			}
			r := ref{k.h, k.v, &sh}
			pp := params{code: codeFixedWindow}
			r.store(&pp, i, found, &state{a: exp}, exp, now)
			if exp <= now {
				delete(model, k)
			} else {
				model[k] = exp
			}
		case op < 8: // remove
			if i, found := sh.find(k.h, k.v); found {
				sh.remove(i)
			}
			delete(model, k)
		case op < 9:
			now += rng.Int64N(20)
		default:
			if rng.IntN(50) == 0 {
				sh.sweep(now)
				for k, exp := range model {
					if exp <= now {
						delete(model, k)
					}
				}
			}
		}
		if sh.n != len(model) {
			t.Fatalf("step %d: n = %d, model has %d", step, sh.n, len(model))
		}
		if tooFull(sh.n, len(sh.slots)) {
			t.Fatalf("step %d: %d of %d slots used", step, sh.n, len(sh.slots))
		}
	}
	used := 0
	for _, s := range sh.slots {
		if s.code != 0 {
			used++
			if exp, ok := model[hkey{s.h, s.v}]; !ok || exp != s.exp || s.a != exp {
				t.Fatalf("slot %v not in the model (exp %d, %v)", s, exp, ok)
			}
		}
	}
	for k := range model {
		if _, found := sh.find(k.h, k.v); !found {
			t.Fatalf("%v lost", k)
		}
	}
	if used != len(model) {
		t.Fatalf("%d slots used, model has %d", used, len(model))
	}
}

func TestPairHash(t *testing.T) {
	sd := hashSeed{h: 12345, v: 67890}
	seen := map[hkey][2]string{}
	for _, p := range []string{"", "a", "ab", "abc", "policy", "a-policy-name-longer-than-16", "api_key:1"} {
		for i := range 3000 {
			k := string(rune('a'+i%26)) + string(make([]byte, i%40))
			if i%3 == 0 {
				k = p + k
			}
			h, v, _ := sd.pairHash(p, k)
			if prev, ok := seen[hkey{h, v}]; ok && prev != [2]string{p, k} {
				t.Fatalf("(%q, %q) and (%q, %q) collide", p, k, prev[0], prev[1])
			}
			seen[hkey{h, v}] = [2]string{p, k}
		}
	}
	// The split between policy and key matters.
	h1, v1, _ := sd.pairHash("ab", "c")
	h2, v2, _ := sd.pairHash("a", "bc")
	if h1 == h2 || v1 == v2 {
		t.Fatal("(ab, c) and (a, bc) share a lane")
	}
}

func TestShardSize(t *testing.T) {
	// Shards are indexed on every check: a power-of-two size is a shift.
	if got := unsafe.Sizeof(shard{}); got != 128 {
		t.Errorf("shard is %d bytes, want 128", got)
	}
	// MemoryStore's doc comment says what a shard's policy cache costs.
	if got := unsafe.Sizeof([policySlots]policyEntry{}); got != 1024 {
		t.Errorf("a shard's policy cache is %d bytes, documented as 1 KiB", got)
	}
}

func TestPolicySlot(t *testing.T) {
	// Policies side by side in a slice, as a caller holding its rules in
	// one would pass them, must not all share one cache entry.
	ps := make([]Policy, policySlots)
	seen := map[uint64]bool{}
	for i := range ps {
		seen[policySlot(&ps[i])] = true
	}
	if len(seen) < policySlots/2 {
		t.Errorf("%d adjacent policies use %d of %d cache slots", len(ps), len(seen), policySlots)
	}
}
