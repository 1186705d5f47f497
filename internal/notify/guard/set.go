package guard

import (
	"container/list"
	"context"
	"sync"

	"github.com/sluicehq/sluice/internal/notify"
)

// Set guards one provider per destination: each key (the webhook
// channel's receiver host) gets a guarding [Provider] of its own, with
// its own breaker and pacer, so one slow or failing receiver trips its own
// breaker and waits its own turn while every other receiver is called as
// usual. It is itself a notify.Provider.
//
// Memory is bounded by Max guards, the least recently used dropped first.
// The trade-off: a dropped key's breaker is forgotten, so a failing
// receiver not called for a long while (among more than Max busier ones)
// starts again closed, and costs Failures calls before it opens again.
//
// Provider, Key and New are required. A Set is safe for concurrent use.
type Set struct {
	Provider notify.Provider
	// Key returns the destination of m; messages with one key share a
	// guard.
	Key func(m notify.Message) string
	// New returns the breaker and pacer of a new key's guard; either may
	// be nil (none).
	New func(key string) (*Breaker, *Pacer)
	// Metrics receive every guard's calls under the provider's name (not
	// per key: keys are unbounded). Its Breaker hook is not called;
	// report per-key breaker changes from New's breakers instead.
	Metrics Metrics
	// Max bounds the guards kept. If zero, 10,000.
	Max int

	mu     sync.Mutex
	guards map[string]*list.Element // of *keyedGuard
	lru    list.List                // front: most recently used
}

type keyedGuard struct {
	key   string
	guard *Provider
}

var _ notify.Provider = (*Set)(nil)

// Name returns the wrapped provider's name.
func (s *Set) Name() string { return s.Provider.Name() }

// NeedsContact returns the wrapped provider's answer.
func (s *Set) NeedsContact() bool { return s.Provider.NeedsContact() }

// Send sends m through its destination's guard (see Provider.Send).
func (s *Set) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	return s.guard(s.Key(m)).Send(ctx, m)
}

// BreakerState returns key's breaker state (closed when it has no guard).
func (s *Set) BreakerState(key string) BreakerState {
	s.mu.Lock()
	e, ok := s.guards[key]
	s.mu.Unlock()
	if !ok {
		return BreakerClosed
	}
	return e.Value.(*keyedGuard).guard.BreakerState()
}

// Len returns how many guards are kept.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.guards)
}

func (s *Set) guard(key string) *Provider {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.guards[key]; ok {
		s.lru.MoveToFront(e)
		return e.Value.(*keyedGuard).guard
	}
	if s.guards == nil {
		s.guards = map[string]*list.Element{}
	}
	metrics := s.Metrics
	metrics.Breaker = nil
	b, p := s.New(key)
	g := &Provider{Provider: s.Provider, Breaker: b, Pacer: p, Metrics: metrics}
	s.guards[key] = s.lru.PushFront(&keyedGuard{key: key, guard: g})
	max := s.Max
	if max <= 0 {
		max = 10_000
	}
	for len(s.guards) > max {
		old := s.lru.Back()
		s.lru.Remove(old)
		delete(s.guards, old.Value.(*keyedGuard).key)
	}
	return g
}
