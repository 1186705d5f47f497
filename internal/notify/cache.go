package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// ttlCache keeps up to max values for ttl each. Loads of one key are not
// coalesced: a miss costs one store read per caller, which is what the
// store would see without a cache. When full, it drops everything (cheap,
// and rare at the sizes used).
type ttlCache[K comparable, V any] struct {
	mu  sync.Mutex
	m   map[K]cached[V]
	max int
	ttl time.Duration
	now func() time.Time
}

type cached[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[K comparable, V any](max int, ttl time.Duration, now func() time.Time) *ttlCache[K, V] {
	return &ttlCache[K, V]{m: map[K]cached[V]{}, max: max, ttl: ttl, now: now}
}

func (c *ttlCache[K, V]) get(ctx context.Context, k K, load func(context.Context) (V, error)) (V, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.v, nil
	}
	v, err := load(ctx)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = cached[V]{v: v, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return v, nil
}

// missing returns the keys of ks not cached (or expired), each once.
func (c *ttlCache[K, V]) missing(ks []K) []K {
	now := c.now()
	var out []K
	seen := make(map[K]bool, len(ks))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range ks {
		if e, ok := c.m[k]; (!ok || !now.Before(e.expires)) && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// put caches v under k.
func (c *ttlCache[K, V]) put(k K, v V) {
	now := c.now()
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = cached[V]{v: v, expires: now.Add(c.ttl)}
	c.mu.Unlock()
}

func (c *ttlCache[K, V]) forget(k K) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

// MemoryDedupe is the in-process request_id fast path used when no Redis is
// configured: up to max keys, each kept for ttl, the oldest dropped first
// when full. It is safe for concurrent use.
type MemoryDedupe struct {
	mu    sync.Mutex
	m     map[string]dedupeEntry
	order []string // insertion order, for eviction; may hold released keys
	max   int
	ttl   time.Duration
	now   func() time.Time
}

type dedupeEntry struct {
	value   string
	expires time.Time
}

var _ Dedupe = (*MemoryDedupe)(nil)

// NewMemoryDedupe returns an empty MemoryDedupe. If now is nil, time.Now.
func NewMemoryDedupe(max int, ttl time.Duration, now func() time.Time) *MemoryDedupe {
	if now == nil {
		now = time.Now
	}
	return &MemoryDedupe{m: map[string]dedupeEntry{}, max: max, ttl: ttl, now: now}
}

// Claim implements Dedupe.
func (d *MemoryDedupe) Claim(_ context.Context, key, value string) (string, bool, error) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.m[key]; ok && now.Before(e.expires) {
		return e.value, false, nil
	}
	for len(d.order) > 0 && (len(d.m) >= d.max || len(d.order) > 2*d.max) {
		old := d.order[0]
		d.order = d.order[1:]
		if e, ok := d.m[old]; ok && (len(d.m) >= d.max || !now.Before(e.expires)) {
			delete(d.m, old)
		}
	}
	d.m[key] = dedupeEntry{value: value, expires: now.Add(d.ttl)}
	d.order = append(d.order, key)
	return "", true, nil
}

// Release implements Dedupe.
func (d *MemoryDedupe) Release(_ context.Context, key string) error {
	d.mu.Lock()
	delete(d.m, key)
	d.mu.Unlock()
	return nil
}

// decodeData reads a job's data object for rendering.
func decodeData(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode data: %w", err)
	}
	return m, nil
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}
