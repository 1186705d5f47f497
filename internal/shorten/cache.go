package shorten

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// cacheShards splits the cache's lock; a power of two.
const cacheShards = 32

// evictSample is how many entries an insertion into a full shard looks at
// to find one not used since the last sweep.
const evictSample = 16

// entry is what the redirect path needs of a link, or the fact that there
// is none. It is immutable once cached except for visited.
type entry struct {
	id        int64
	url       string
	expiresAt int64 // Unix microseconds; 0: never
	notFound  bool
	rules     *RuleSet // nil: none
	// until is when the entry stops being trusted (Unix microseconds), so
	// that changes made on other nodes (a delete) are seen within the TTL;
	// keep is when it stops answering at all, even while the store fails
	// (StaleTTL past until; 0: at until).
	until, keep int64
	visited     atomic.Bool
	// extra is nil for a plain link; see LinkExtras.
	extra *LinkExtras
}

// expired reports whether the link behind e has expired at now.
func (e *entry) expired(now int64) bool { return e.expiresAt != 0 && now >= e.expiresAt }

// cache is a bounded map from code to entry, safe for concurrent use.
//
// Eviction is a sampled CLOCK: a hit sets the entry's visited bit; an
// insertion into a full shard walks a few entries from a random point (Go
// map iteration starts at one), clearing visited bits, and evicts the first
// entry it finds unvisited (or the last one looked at). Hot codes therefore
// stay and one-off codes go first, with no list to reorder under a write
// lock on every hit: a hit takes only a read lock.
type cache struct {
	seed     maphash.Seed
	perShard int
	shards   [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string]*entry
}

// newCache returns a cache holding at most about size entries; a size
// below one per shard still keeps one per shard.
func newCache(size int) *cache {
	c := &cache{seed: maphash.MakeSeed(), perShard: max(1, size/cacheShards)}
	for i := range c.shards {
		c.shards[i].m = make(map[string]*entry)
	}
	return c
}

func (c *cache) shard(code string) *cacheShard {
	return &c.shards[maphash.String(c.seed, code)&(cacheShards-1)]
}

// get returns the entry for code if there is one still trusted at now.
func (c *cache) get(code string, now int64) *entry {
	sh := c.shard(code)
	sh.mu.RLock()
	e := sh.m[code]
	sh.mu.RUnlock()
	if e == nil || now >= e.until {
		return nil
	}
	if !e.visited.Load() {
		e.visited.Store(true)
	}
	return e
}

// stale returns the entry for code if it is past its trust but still
// kept at now (Options.StaleTTL), for answering while the store fails.
func (c *cache) stale(code string, now int64) *entry {
	sh := c.shard(code)
	sh.mu.RLock()
	e := sh.m[code]
	sh.mu.RUnlock()
	if e == nil || e.notFound || now >= max(e.until, e.keep) {
		return nil
	}
	return e
}

// put stores e under code, evicting another entry if the shard is full.
func (c *cache) put(code string, e *entry) {
	sh := c.shard(code)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[code]; !ok && len(sh.m) >= c.perShard {
		var victim string
		n := 0
		for k, old := range sh.m {
			victim = k
			if !old.visited.Swap(false) {
				break
			}
			if n++; n >= evictSample {
				break
			}
		}
		delete(sh.m, victim)
	}
	sh.m[code] = e
}

// remove drops code.
func (c *cache) remove(code string) {
	sh := c.shard(code)
	sh.mu.Lock()
	delete(sh.m, code)
	sh.mu.Unlock()
}

// len counts the entries.
func (c *cache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}
