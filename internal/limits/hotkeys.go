package limits

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// DefaultHotKeys is how many over-limit keys HotKeys remembers by default.
const DefaultHotKeys = 100_000

// HotKeys is a ratelimit.Store in front of a remote one that answers a key
// already refused, until its RetryAfter has passed, without a round trip:
// an abusive client hammering an exhausted key costs the shared store
// nothing. Its refusals are exact because a refused request consumes
// nothing and nothing else gives capacity back before RetryAfter, except a
// Reset or a cancelled reservation (which clear the remembered refusal on
// this node, and a reset on every node through Service.Heard) and a policy
// change (a refusal is answered only for the very policy it was made
// under, and Service.Heard drops the changed policy's refusals).
// A request asking for another cost than the refused one (whose RetryAfter
// would differ), or a concurrency policy (whose slots come back on
// release), always goes to the store.
//
// A remembered refusal's Remaining is the store's when it refused: capacity
// that comes back gradually (a refilling bucket, requests leaving a sliding
// window) shows only once the store is asked again, after RetryAfter.
//
// Memory is bounded: at most Max keys are remembered; when full, expired
// ones are swept, and if none expired an arbitrary half is forgotten (which
// costs only round trips). It is safe for concurrent use.
type HotKeys struct {
	next ratelimit.Store
	now  func() time.Time
	max  int

	mu sync.Mutex
	m  map[hotKey]hotEntry
}

type hotKey struct{ policy, key string }

type hotEntry struct {
	policy ratelimit.Policy
	cost   int64
	at     time.Time
	until  time.Time
	d      ratelimit.Decision
}

var (
	_ ratelimit.Store = (*HotKeys)(nil)
	_ Forgetter       = (*HotKeys)(nil)
)

// NewHotKeys wraps next, remembering at most max refused keys (if max <= 0,
// DefaultHotKeys). now is the clock; if nil, time.Now.
func NewHotKeys(next ratelimit.Store, max int, now func() time.Time) *HotKeys {
	if max <= 0 {
		max = DefaultHotKeys
	}
	if now == nil {
		now = time.Now
	}
	return &HotKeys{next: next, now: now, max: max, m: map[hotKey]hotEntry{}}
}

// Len returns how many refusals are remembered.
func (h *HotKeys) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

// cached returns the remembered refusal of key under p for cost, if any.
func (h *HotKeys) cached(p *ratelimit.Policy, key string, cost int64, now time.Time) (ratelimit.Decision, bool) {
	if p.Algorithm == ratelimit.Concurrency {
		return ratelimit.Decision{}, false
	}
	h.mu.Lock()
	e, ok := h.m[hotKey{p.Name, key}]
	h.mu.Unlock()
	if !ok || e.policy != *p || cost != e.cost || !now.Before(e.until) {
		return ratelimit.Decision{}, false
	}
	d := e.d
	elapsed := now.Sub(e.at)
	d.RetryAfter = e.until.Sub(now)
	d.ResetAfter = max(d.RetryAfter, d.ResetAfter-elapsed)
	return d, true
}

// remember records d, the store's answer for key under p, when refused.
func (h *HotKeys) remember(p *ratelimit.Policy, key string, cost int64, d ratelimit.Decision, now time.Time) {
	if p.Algorithm == ratelimit.Concurrency {
		return
	}
	k := hotKey{p.Name, key}
	h.mu.Lock()
	defer h.mu.Unlock()
	if d.Allowed || d.RetryAfter <= 0 {
		delete(h.m, k)
		return
	}
	if len(h.m) >= h.max {
		h.evict(now)
	}
	h.m[k] = hotEntry{policy: *p, cost: cost, at: now, until: now.Add(d.RetryAfter), d: d}
}

// evict makes room: expired entries first, else half of them.
func (h *HotKeys) evict(now time.Time) {
	for k, e := range h.m {
		if !now.Before(e.until) {
			delete(h.m, k)
		}
	}
	for k := range h.m {
		if len(h.m) < h.max/2+1 {
			return
		}
		delete(h.m, k)
	}
}

// Allow implements ratelimit.Store.
func (h *HotKeys) Allow(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Decision, error) {
	now := h.now()
	if d, ok := h.cached(p, key, cost, now); ok {
		return d, nil
	}
	d, err := h.next.Allow(ctx, p, key, cost)
	if err == nil {
		h.remember(p, key, cost, d, now)
	}
	return d, err
}

// AllowMulti implements ratelimit.Store. It answers locally only when every
// check is a remembered refusal.
func (h *HotKeys) AllowMulti(ctx context.Context, checks []ratelimit.Check) ([]ratelimit.Decision, error) {
	now := h.now()
	ds := make([]ratelimit.Decision, len(checks))
	all := len(checks) > 0
	for i, c := range checks {
		d, ok := h.cached(c.Policy, c.Key, c.Cost, now)
		if !ok {
			all = false
			break
		}
		ds[i] = d
	}
	if all {
		return ds, nil
	}
	ds, err := h.next.AllowMulti(ctx, checks)
	if err != nil {
		return ds, err
	}
	for i, c := range checks {
		if !ds[i].Allowed {
			h.remember(c.Policy, c.Key, c.Cost, ds[i], now)
		}
	}
	return ds, nil
}

// Peek implements ratelimit.Store; it always asks the store.
func (h *HotKeys) Peek(ctx context.Context, p *ratelimit.Policy, key string) (ratelimit.Decision, error) {
	return h.next.Peek(ctx, p, key)
}

// Forget drops the remembered refusal of key under the named policy.
// Service.Heard calls it when any node resets the key.
func (h *HotKeys) Forget(policy, key string) {
	h.mu.Lock()
	delete(h.m, hotKey{policy, key})
	h.mu.Unlock()
}

// ForgetPolicy drops the remembered refusals of every key of the named
// policy. Service.Heard calls it when any node changes the policy.
func (h *HotKeys) ForgetPolicy(policy string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.m {
		if k.policy == policy {
			delete(h.m, k)
		}
	}
}

// Reset implements ratelimit.Store, forgetting the remembered refusal.
func (h *HotKeys) Reset(ctx context.Context, p *ratelimit.Policy, key string) error {
	h.Forget(p.Name, key)
	return h.next.Reset(ctx, p, key)
}

// Reserve implements ratelimit.Store.
func (h *HotKeys) Reserve(ctx context.Context, p *ratelimit.Policy, key string, cost int64, maxWait time.Duration) (ratelimit.Reservation, error) {
	return h.next.Reserve(ctx, p, key, cost, maxWait)
}

// CancelReservation implements ratelimit.Store, forgetting the remembered
// refusal: the cancelled capacity may make it wrong.
func (h *HotKeys) CancelReservation(ctx context.Context, r ratelimit.Reservation) error {
	if r.Policy != nil {
		h.Forget(r.Policy.Name, r.Key)
	}
	return h.next.CancelReservation(ctx, r)
}

// Acquire implements ratelimit.Store.
func (h *HotKeys) Acquire(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Lease, ratelimit.Decision, error) {
	return h.next.Acquire(ctx, p, key, cost)
}

// Release implements ratelimit.Store.
func (h *HotKeys) Release(ctx context.Context, l ratelimit.Lease) error {
	return h.next.Release(ctx, l)
}
