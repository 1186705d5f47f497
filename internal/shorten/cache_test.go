package shorten

import (
	"fmt"
	"testing"
)

func TestCacheBoundedAndKeepsHotEntries(t *testing.T) {
	t.Parallel()
	c := newCache(cacheShards * 4)
	hot := &entry{url: "hot", until: 100}
	c.put("hot", hot)
	for i := range 10_000 {
		c.put(fmt.Sprint("k", i), &entry{url: "cold", until: 100})
		if c.get("hot", 1) == nil && i < 9_999 {
			// Lost before its next hit can set the bit again: allowed only
			// if the shard swept it twice without a hit in between, which a
			// hit per insertion rules out.
			t.Fatalf("hot entry evicted after %d insertions despite a hit after each", i)
		}
	}
	if n := c.len(); n > cacheShards*4 {
		t.Errorf("cache holds %d entries, want at most %d", n, cacheShards*4)
	}
}

func TestCacheTrustsEntriesUntilTheirTime(t *testing.T) {
	t.Parallel()
	c := newCache(100)
	c.put("a", &entry{url: "x", until: 10})
	if c.get("a", 9) == nil {
		t.Error("get before until = nil, want the entry")
	}
	if c.get("a", 10) != nil {
		t.Error("get at until = entry, want nil")
	}
	c.remove("a")
	if c.get("a", 0) != nil {
		t.Error("get after remove = entry, want nil")
	}
}
