package notify

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

// TestMemoryDedupeFillsToItsCap: one client claiming request_ids of the
// longest kind (255 bytes) fills the in-memory fast path to its cap and
// on: it holds at most max keys (the oldest forgotten first; the store's
// unique request_id still decides), its eviction list at most 2×max, and
// each key costs under 1 KiB of live memory (the measured figure is in
// the test's log and in docs/security.md, "Bounds").
func TestMemoryDedupeFillsToItsCap(t *testing.T) {
	// Not parallel: the memory measured is this test's alone.
	const limit = 20_000
	now := time.Unix(1_800_000_000, 0)
	d := NewMemoryDedupe(limit, 24*time.Hour, func() time.Time { return now })
	pad := strings.Repeat("x", MaxRequestIDBytes-12)
	value := NewID("ntf_", now) + " " + strings.Repeat("h", 64) // the id and the request's hash, as Send claims
	claim := func(i int) {
		if _, ok, err := d.Claim(t.Context(), fmt.Sprintf("notify:req:%s%012d", pad, i), value); !ok || err != nil {
			t.Fatalf("claim %d = %v, %v", i, ok, err)
		}
	}
	before := dedupeLiveBytes()
	for i := range limit {
		claim(i)
	}
	per := (float64(dedupeLiveBytes()) - float64(before)) / limit
	t.Logf("a request_id in the in-memory fast path: %.0f bytes each (%d keys of %d bytes)", per, limit, MaxRequestIDBytes+11)
	if per > 1024 {
		t.Errorf("%.0f bytes a key, past the documented bound's margin of 1 KiB", per)
	}
	for i := limit; i < 3*limit; i++ {
		claim(i)
		if i%1000 == 0 {
			_ = d.Release(t.Context(), fmt.Sprintf("notify:req:%s%012d", pad, i)) // a failed send forgets its key
		}
	}
	d.mu.Lock()
	keys, order := len(d.m), len(d.order)
	d.mu.Unlock()
	if keys > limit || order > 2*limit {
		t.Errorf("after %d claims: %d keys, %d in the eviction list; want at most %d and %d", 3*limit, keys, order, limit, 2*limit)
	}
	if _, ok, _ := d.Claim(t.Context(), fmt.Sprintf("notify:req:%s%012d", pad, 0), value); !ok {
		t.Error("the oldest key is still held past the cap")
	}
}

func dedupeLiveBytes() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
