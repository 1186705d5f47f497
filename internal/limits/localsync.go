package limits

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// DefaultSyncKeys is how many keys LocalSync tracks by default.
const DefaultSyncKeys = 100_000

// LocalSyncOptions configures a LocalSync.
type LocalSyncOptions struct {
	// Interval returns the sync interval of the named policy, or 0 when the
	// policy's checks go to the store one by one (every policy without
	// "sync": "local"). Required.
	Interval func(policy string) time.Duration
	// Nodes is how many nodes share the store: each takes 1/Nodes of the
	// remaining allowance as its local share. If zero, 1.
	Nodes int
	// MaxKeys bounds the keys tracked; beyond it, checks on new keys go to
	// the store one by one. If zero, DefaultSyncKeys.
	MaxKeys int
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
	// Logger receives failed flushes (at most one line per sync round). If
	// nil, nothing is logged.
	Logger *slog.Logger
	// Metrics receives SyncedOver. If nil, nothing is recorded.
	Metrics *Metrics
}

// LocalSync is a ratelimit.Store in front of a shared one (Redis, through
// Failover) for the policies that say "sync": "local": each node decides a
// key's checks from its local share of the key's remaining allowance, and
// every sync interval sends the store what it admitted as one charge and
// takes back the store's remainder. A check then costs no round trip, and
// the store sees at most one call per key per interval per node. The first
// check of a key this node does not track goes to the store (and tells
// the node the remainder); a key unused for a whole interval is dropped at
// its next sync.
//
// The price is accuracy (docs/ratelimit.md, "Local sync"): between syncs
// a node does not see the other nodes' checks nor the allowance coming
// back, so a key may admit more than its limit (each node's share is
// rounded up, and a flush may find the store with less than the node
// admitted) or refuse before its limit (one node's share used up while
// another's is idle). A share is taken net of half what the other nodes
// took during the last interval (about what they hold unsent), and a fixed
// window's counts are dropped once their window has ended instead of
// being charged to the next one. A local refusal's RetryAfter is the time until the
// next sync. Multi-key checks, reservations, leases, peeks and resets go
// to the store as for any policy. It is safe for concurrent use.
type LocalSync struct {
	next  ratelimit.Store
	opts  LocalSyncOptions
	syncs sync.Mutex // one Sync at a time

	mu     sync.Mutex
	groups map[time.Duration]*syncGroup
	keys   int
}

// syncGroup is the tracked keys of one interval, synced together.
type syncGroup struct {
	due  time.Time
	keys map[hotKey]*syncEntry
}

type syncEntry struct {
	policy   ratelimit.Policy // as last checked
	share    int64            // what this node may admit until the next sync
	used     int64            // admitted locally since the last sync
	pending  int64            // admitted locally, not yet sent to the store
	d        ratelimit.Decision
	syncedAt time.Time
	lastUse  time.Time
	stale    bool  // the policy changed: ask the store again
	last     int64 // the store's remainder at the last sync
	known    bool  // last is set
}

var (
	_ ratelimit.Store = (*LocalSync)(nil)
	_ Forgetter       = (*LocalSync)(nil)
)

// NewLocalSync wraps next.
func NewLocalSync(next ratelimit.Store, opts LocalSyncOptions) *LocalSync {
	opts.Nodes = max(opts.Nodes, 1)
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultSyncKeys
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &LocalSync{next: next, opts: opts, groups: map[time.Duration]*syncGroup{}}
}

// Len returns how many keys are tracked.
func (s *LocalSync) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys
}

// interval returns p's sync interval, or 0 when p is checked at the store.
func (s *LocalSync) interval(p *ratelimit.Policy) time.Duration {
	if p == nil {
		return 0
	}
	iv := s.opts.Interval(p.Name) // 0 for most policies: asked first, it keeps their checks cheap
	if iv <= 0 || p.Algorithm == ratelimit.Concurrency || p.Validate() != nil {
		return 0
	}
	return iv
}

// adopt takes the store's decision d as e's state at now: the remainder,
// less what this node admitted since (e.pending, not in d), shared.
func (s *LocalSync) adopt(e *syncEntry, d ratelimit.Decision, now time.Time, charge int64) {
	n := int64(s.opts.Nodes)
	r := max(d.Remaining, 0)
	if n > 1 && e.known {
		// What the other nodes took during the last interval is about what
		// they hold unsent now, half of it on average.
		others := max(0, e.last-charge-r)
		r = max(0, r-others/2)
	}
	e.last, e.known = max(d.Remaining, 0), true
	e.d, e.syncedAt, e.stale = d, now, false
	e.share = (r + n - 1) / n
	e.used = min(e.pending, e.share)
}

// windowOver reports whether e is a fixed window's and the window its
// share came from has ended by now: what this node admitted in it belongs
// to a finished window (charging it to the next one would only refuse
// early there), and the share says nothing of the new window.
func windowOver(e *syncEntry, now time.Time) bool {
	return e.policy.Algorithm == ratelimit.FixedWindow && e.d.ResetAfter > 0 && !now.Before(e.syncedAt.Add(e.d.ResetAfter))
}

// Allow implements ratelimit.Store.
func (s *LocalSync) Allow(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Decision, error) {
	iv := s.interval(p)
	if iv <= 0 || cost < 1 || cost > p.MaxCost() {
		return s.next.Allow(ctx, p, key, cost)
	}
	now := s.opts.Now()
	k := hotKey{p.Name, key}
	s.mu.Lock()
	g := s.groups[iv]
	var e *syncEntry
	if g != nil {
		e = g.keys[k]
	}
	if e != nil && windowOver(e, now) {
		e.pending, e.known = 0, false // the window's counts are done with; ask the store
		e.stale = true
	}
	if e != nil && !e.stale && e.policy == *p {
		e.lastUse = now
		d := ratelimit.Decision{Limit: p.Capacity(), ResetAfter: max(0, e.d.ResetAfter-now.Sub(e.syncedAt))}
		if e.used+cost <= e.share {
			e.used += cost
			e.pending += cost
			d.Allowed, d.Remaining = true, e.share-e.used
			if p.Algorithm == ratelimit.TokenBucket || p.Algorithm == ratelimit.GCRA {
				// A bucket is full again later by what was taken since.
				d.ResetAfter += time.Duration(math.Ceil(float64(e.used)*float64(p.Period.Microseconds())/float64(p.Limit))) * time.Microsecond
			}
		} else {
			d.Remaining = e.share - e.used
			d.RetryAfter = max(time.Microsecond, g.due.Sub(now))
		}
		s.mu.Unlock()
		return d, nil
	}
	full := e == nil && s.keys >= s.opts.MaxKeys
	s.mu.Unlock()

	d, err := s.next.Allow(ctx, p, key, cost)
	if err != nil || full {
		return d, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if g = s.groups[iv]; g == nil {
		g = &syncGroup{due: now.Add(iv), keys: map[hotKey]*syncEntry{}}
		s.groups[iv] = g
	}
	if e = g.keys[k]; e == nil {
		if s.keys >= s.opts.MaxKeys {
			return d, nil
		}
		e = &syncEntry{}
		g.keys[k] = e
		s.keys++
	}
	e.policy, e.lastUse = *p, now
	s.adopt(e, d, now, cost)
	return d, nil
}

// Run syncs every group when its interval is due, until ctx ends, and
// then once more, sending what is still pending.
func (s *LocalSync) Run(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// What this node admitted since the last sync still counts.
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			s.mu.Lock()
			for _, g := range s.groups {
				g.due = s.opts.Now()
			}
			s.mu.Unlock()
			s.Sync(flushCtx)
			cancel()
			return nil
		case <-t.C:
			s.Sync(ctx)
		}
	}
}

// flush is one key's part of a sync.
type flush struct {
	k      hotKey
	e      *syncEntry
	policy ratelimit.Policy
	charge int64
}

// Sync syncs the groups whose interval is due: each tracked key sends what
// this node admitted since the last sync as one charge (or, when nothing,
// asks for the key's state) and takes the store's remainder as its new
// share; a key unused for a whole interval is dropped instead.
func (s *LocalSync) Sync(ctx context.Context) {
	s.syncs.Lock()
	defer s.syncs.Unlock()
	now := s.opts.Now()
	var work []flush
	s.mu.Lock()
	for iv, g := range s.groups {
		if g.due.After(now) {
			continue
		}
		g.due = now.Add(iv)
		for k, e := range g.keys {
			if windowOver(e, now) {
				e.pending, e.known = 0, false
			}
			if e.pending == 0 {
				if now.Sub(e.lastUse) >= iv {
					delete(g.keys, k)
					s.keys--
					continue
				}
				if !e.lastUse.After(e.syncedAt) && now.Sub(e.syncedAt) < iv {
					continue // not checked since its state came, not long ago: nothing to send or learn yet
				}
			}
			c := min(e.pending, e.policy.MaxCost())
			e.pending -= c
			work = append(work, flush{k: k, e: e, policy: e.policy, charge: c})
		}
		if len(g.keys) == 0 {
			delete(s.groups, iv)
		}
	}
	s.mu.Unlock()

	const workers = 64
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	var failed error
	var failMu sync.Mutex
	for i := range work {
		f := &work[i]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d, err := s.flush(ctx, f)
			s.mu.Lock()
			if err != nil {
				f.e.pending += f.charge // sent again next time
			} else {
				s.adopt(f.e, d, now, f.charge)
			}
			s.mu.Unlock()
			if err != nil {
				failMu.Lock()
				failed = err
				failMu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != nil && s.opts.Logger != nil {
		s.opts.Logger.Warn("rate limit local sync: some keys could not be synced; they are tried again next interval", "error", failed)
	}
}

// flush sends f's charge to the store, or asks for the key's state when
// there is none. When the store has less left than the charge, it takes
// what is left (the rest was admitted over the limit) and the remainder is
// zero.
func (s *LocalSync) flush(ctx context.Context, f *flush) (ratelimit.Decision, error) {
	if f.charge == 0 {
		return s.next.Peek(ctx, &f.policy, f.k.key)
	}
	d, err := s.next.Allow(ctx, &f.policy, f.k.key, f.charge)
	if err != nil || d.Allowed {
		return d, err
	}
	taken := int64(0)
	if d.Remaining > 0 {
		if d2, err := s.next.Allow(ctx, &f.policy, f.k.key, d.Remaining); err == nil && d2.Allowed {
			taken, d = d.Remaining, d2
		}
	}
	s.opts.Metrics.syncedOver(f.policy.Name, f.charge-taken)
	d.Remaining = 0
	return d, nil
}

// AllowMulti implements ratelimit.Store: multi-key checks go to the store.
func (s *LocalSync) AllowMulti(ctx context.Context, checks []ratelimit.Check) ([]ratelimit.Decision, error) {
	return s.next.AllowMulti(ctx, checks)
}

// Reserve implements ratelimit.Store.
func (s *LocalSync) Reserve(ctx context.Context, p *ratelimit.Policy, key string, cost int64, maxWait time.Duration) (ratelimit.Reservation, error) {
	return s.next.Reserve(ctx, p, key, cost, maxWait)
}

// CancelReservation implements ratelimit.Store.
func (s *LocalSync) CancelReservation(ctx context.Context, r ratelimit.Reservation) error {
	return s.next.CancelReservation(ctx, r)
}

// Peek implements ratelimit.Store.
func (s *LocalSync) Peek(ctx context.Context, p *ratelimit.Policy, key string) (ratelimit.Decision, error) {
	return s.next.Peek(ctx, p, key)
}

// Reset implements ratelimit.Store: the store's counters go, and so does
// this node's share of them.
func (s *LocalSync) Reset(ctx context.Context, p *ratelimit.Policy, key string) error {
	if p != nil {
		s.Forget(p.Name, key)
	}
	return s.next.Reset(ctx, p, key)
}

// Acquire implements ratelimit.Store.
func (s *LocalSync) Acquire(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Lease, ratelimit.Decision, error) {
	return s.next.Acquire(ctx, p, key, cost)
}

// Release implements ratelimit.Store.
func (s *LocalSync) Release(ctx context.Context, l ratelimit.Lease) error {
	return s.next.Release(ctx, l)
}

// Forget implements Forgetter: the key (reset on some node) is dropped,
// with what this node admitted of it and has not sent, since the counters
// it would be charged to are gone.
func (s *LocalSync) Forget(policy, key string) {
	s.mu.Lock()
	for _, g := range s.groups {
		if _, ok := g.keys[hotKey{policy, key}]; ok {
			delete(g.keys, hotKey{policy, key})
			s.keys--
		}
	}
	s.mu.Unlock()
	if f, ok := s.next.(Forgetter); ok {
		f.Forget(policy, key)
	}
}

// ForgetPolicy implements Forgetter: the policy changed, so each of its
// keys asks the store again at its next check (what was admitted is still
// sent at the next sync).
func (s *LocalSync) ForgetPolicy(policy string) {
	s.mu.Lock()
	for _, g := range s.groups {
		for k, e := range g.keys {
			if k.policy == policy {
				e.stale = true
			}
		}
	}
	s.mu.Unlock()
	if f, ok := s.next.(Forgetter); ok {
		f.ForgetPolicy(policy)
	}
}
