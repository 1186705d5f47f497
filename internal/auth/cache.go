package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// KeyStore is what a Cache asks: the stored key whose Hash is hash, or an
// apperr.NotFound error (*store.DB).
type KeyStore interface {
	APIKeyByHash(ctx context.Context, hash string) (Key, error)
}

// CacheOptions tune a Cache. Zero fields take the defaults named.
type CacheOptions struct {
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// TTL is how long an answer is served before the store is asked
	// again, so how long a revoked or new key takes to be noticed (3s).
	TTL time.Duration
	// StaleIfError is how long an active key's answer still serves while
	// the store fails (15m); with StaleRefusals, every answer's.
	StaleIfError time.Duration
	// StaleIf reports which store errors a stale answer may stand in for;
	// nil: all of them.
	StaleIf func(error) bool
	// StaleRefusals makes answers that a key is unknown or revoked serve
	// stale too; else, while the store fails, only active keys do.
	StaleRefusals bool
	// KnownMax and UnknownMax bound the maps of active keys (10,000) and
	// of unknown or revoked ones (1,000); a full map is cleared.
	KnownMax, UnknownMax int
	// LookupTimeout bounds one store lookup (250ms).
	LookupTimeout time.Duration
}

// Answer is what the store said of one key, and when.
type Answer struct {
	Key   Key
	Found bool
	At    time.Time
	// Stale is the store error this older answer stands in for; nil when
	// the answer is fresh.
	Stale error
}

// Cache remembers what the store said of the keys clients present, so a
// call with a known key costs a map lookup, not a query: the store is
// asked about a key at most once per TTL, calls for a key being looked up
// wait for that lookup instead of making their own, and memory is bounded
// whatever keys clients send (only plausible ones should reach it). It is
// safe for concurrent use, and its hits do not allocate.
type Cache struct {
	store KeyStore
	o     CacheOptions

	known, unknown   sync.Map // [sha256.Size]byte -> *Answer
	nKnown, nUnknown atomic.Int64
	mu               sync.Mutex
	inflight         map[[sha256.Size]byte]*lookup
}

// lookup is one store lookup other calls for the same key wait for.
type lookup struct {
	done chan struct{}
	ans  Answer
	err  error
}

// NewCache returns a Cache of store's answers.
func NewCache(store KeyStore, o CacheOptions) *Cache {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TTL <= 0 {
		o.TTL = 3 * time.Second
	}
	if o.StaleIfError <= 0 {
		o.StaleIfError = 15 * time.Minute
	}
	if o.KnownMax <= 0 {
		o.KnownMax = 10_000
	}
	if o.UnknownMax <= 0 {
		o.UnknownMax = 1_000
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = 250 * time.Millisecond
	}
	return &Cache{store: store, o: o, inflight: make(map[[sha256.Size]byte]*lookup)}
}

// SumSecret returns the SHA-256 of secret (HashSecret is its hex form),
// hashed from the stack for secrets of NewKey's length: no allocation.
func SumSecret(secret string) [sha256.Size]byte {
	var buf [64]byte
	if len(secret) <= len(buf) {
		return sha256.Sum256(buf[:copy(buf[:], secret)])
	}
	return sha256.Sum256([]byte(secret))
}

// Lookup returns what the store says of the key whose secret hashes to
// sum, from the cache when the answer is fresh. When the store fails, an
// answer younger than StaleIfError that may stand in (see CacheOptions) is
// returned with Stale set, else the store's error.
func (c *Cache) Lookup(ctx context.Context, sum [sha256.Size]byte) (Answer, error) {
	now := c.o.Now()
	if a, ok := c.fresh(&c.known, sum, now); ok {
		return a, nil
	}
	if a, ok := c.fresh(&c.unknown, sum, now); ok {
		return a, nil
	}
	c.mu.Lock()
	l, waiting := c.inflight[sum]
	if !waiting {
		l = &lookup{done: make(chan struct{})}
		c.inflight[sum] = l
	}
	c.mu.Unlock()
	if !waiting {
		l.ans, l.err = c.ask(ctx, sum, now)
		c.mu.Lock()
		delete(c.inflight, sum)
		c.mu.Unlock()
		close(l.done)
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	}
	return l.ans, l.err
}

// fresh returns m's answer for sum when it is younger than TTL.
func (c *Cache) fresh(m *sync.Map, sum [sha256.Size]byte, now time.Time) (Answer, bool) {
	if v, ok := m.Load(sum); ok && now.Sub(v.(*Answer).At) < c.o.TTL {
		return *v.(*Answer), true
	}
	return Answer{}, false
}

// ask asks the store about the key hashed to sum and caches the answer.
func (c *Cache) ask(ctx context.Context, sum [sha256.Size]byte, now time.Time) (Answer, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.LookupTimeout)
	defer cancel()
	key, err := c.store.APIKeyByHash(ctx, hex.EncodeToString(sum[:]))
	if err != nil && !apperr.Is(err, apperr.NotFound) {
		if c.o.StaleIf == nil || c.o.StaleIf(err) {
			if a, ok := c.stale(sum, now); ok {
				a.Stale = err
				return a, nil
			}
		}
		return Answer{}, err
	}
	ans := &Answer{Key: key, Found: err == nil, At: now}
	m, n, limit := &c.unknown, &c.nUnknown, int64(c.o.UnknownMax)
	if ans.Found && key.Active() {
		m, n, limit = &c.known, &c.nKnown, int64(c.o.KnownMax)
		if _, ok := c.unknown.LoadAndDelete(sum); ok {
			c.nUnknown.Add(-1)
		}
	} else if _, ok := c.known.LoadAndDelete(sum); ok {
		c.nKnown.Add(-1)
	}
	if n.Load() >= limit {
		m.Clear() // crude but bounded; a full map means many distinct keys, or an attack
		n.Store(0)
	}
	if _, had := m.Swap(sum, ans); !had {
		n.Add(1)
	}
	return *ans, nil
}

// stale returns the cached answer for sum younger than StaleIfError that
// may serve while the store fails.
func (c *Cache) stale(sum [sha256.Size]byte, now time.Time) (Answer, bool) {
	maps := []*sync.Map{&c.known}
	if c.o.StaleRefusals {
		maps = append(maps, &c.unknown)
	}
	for _, m := range maps {
		if v, ok := m.Load(sum); ok && now.Sub(v.(*Answer).At) < c.o.StaleIfError {
			return *v.(*Answer), true
		}
	}
	return Answer{}, false
}

// Forget drops every cached answer, so changes made through this process
// apply at once.
func (c *Cache) Forget() {
	c.known.Clear()
	c.unknown.Clear()
	c.nKnown.Store(0)
	c.nUnknown.Store(0)
}
