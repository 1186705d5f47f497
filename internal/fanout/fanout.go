// Package fanout hands values to the subscriptions of a topic on this node
// (an inbox user's events, a link's live hits) within bounds: streams on
// the node, per key (the API key that opened them) and per topic, each
// with a bounded buffer. Publish never blocks: a subscription whose
// buffer is full is ended (Lagged), so a slow client never holds the
// publisher nor the other subscriptions; its client reconnects. Standard
// library only, so the domains use it.
package fanout

import (
	"errors"
	"sync"
)

// ErrClosed: the hub is closed (the node is shutting down).
var ErrClosed = errors.New("fan-out closed")

// Full tells which bounds a refused subscription reached, so each user of
// a Hub names the one it reports first, in its own words
// (Options.Refused). It is the error when there is no Options.Refused.
type Full struct {
	Node  bool // Options.MaxStreams subscriptions are open
	Key   bool // the key holds Options.MaxPerKey
	Topic bool // the topic holds Options.MaxPerTopic
}

func (f *Full) Error() string { return "too many subscriptions" }

// Options bound a Hub. MaxStreams and Buffer must be positive.
type Options struct {
	// MaxStreams bounds the subscriptions open at once.
	MaxStreams int
	// MaxPerKey bounds those of one key. If KeylessUnbounded, the key ""
	// (no key) is not bounded by it.
	MaxPerKey        int
	KeylessUnbounded bool
	// MaxPerTopic bounds those of one topic; zero is no bound.
	MaxPerTopic int
	// Buffer bounds the values one subscription holds unread.
	Buffer int
	// Refused returns Subscribe's error for a subscription refused at
	// the bounds full names. If nil, the error is a *Full.
	Refused func(full Full) error
	// Closed is Subscribe's error once the hub closed. If nil, ErrClosed.
	Closed error
}

// Hub fans values of type T out to the subscriptions of their topic K.
// It is safe for concurrent use; the zero value is not usable (use New).
type Hub[K comparable, T any] struct {
	opts   Options
	mu     sync.Mutex
	topics map[K]map[*Subscription[K, T]]struct{}
	keys   map[string]int // key -> subscriptions open
	open   int
	closed bool
}

// New returns a Hub for opts.
func New[K comparable, T any](opts Options) *Hub[K, T] {
	return &Hub[K, T]{opts: opts, topics: map[K]map[*Subscription[K, T]]struct{}{}, keys: map[string]int{}}
}

// Subscription is one subscriber's feed of its topic's values, on C. C is
// closed when the subscription ends: Close was called, it fell Buffer
// values behind (Lagged reports it), or the hub closed. It is safe for
// concurrent use.
type Subscription[K comparable, T any] struct {
	C      <-chan T
	c      chan T
	topic  K
	key    string
	hub    *Hub[K, T]
	lagged bool // under hub.mu
}

// Subscribe opens a feed of topic's values for key, refused past a bound
// (Options.Refused) and once the hub closed (Options.Closed). The caller
// must Close it.
func (h *Hub[K, T]) Subscribe(topic K, key string) (*Subscription[K, T], error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		if h.opts.Closed != nil {
			return nil, h.opts.Closed
		}
		return nil, ErrClosed
	}
	counted := key != "" || !h.opts.KeylessUnbounded
	full := Full{
		Node:  h.open >= h.opts.MaxStreams,
		Key:   counted && h.keys[key] >= h.opts.MaxPerKey,
		Topic: h.opts.MaxPerTopic > 0 && len(h.topics[topic]) >= h.opts.MaxPerTopic,
	}
	if full.Node || full.Key || full.Topic {
		if h.opts.Refused != nil {
			return nil, h.opts.Refused(full)
		}
		return nil, &full
	}
	c := make(chan T, h.opts.Buffer)
	sub := &Subscription[K, T]{C: c, c: c, topic: topic, key: key, hub: h}
	if counted {
		h.keys[key]++
	}
	if h.topics[topic] == nil {
		h.topics[topic] = map[*Subscription[K, T]]struct{}{}
	}
	h.topics[topic][sub] = struct{}{}
	h.open++
	return sub, nil
}

// Close ends the subscription; closing twice is harmless.
func (sub *Subscription[K, T]) Close() {
	sub.hub.mu.Lock()
	defer sub.hub.mu.Unlock()
	sub.hub.drop(sub)
}

// Lagged reports whether the subscription ended for falling behind.
func (sub *Subscription[K, T]) Lagged() bool {
	sub.hub.mu.Lock()
	defer sub.hub.mu.Unlock()
	return sub.lagged
}

// drop removes sub and closes its channel, once. h.mu is held.
func (h *Hub[K, T]) drop(sub *Subscription[K, T]) {
	subs := h.topics[sub.topic]
	if _, ok := subs[sub]; !ok {
		return
	}
	delete(subs, sub)
	if len(subs) == 0 {
		delete(h.topics, sub.topic)
	}
	if sub.key != "" || !h.opts.KeylessUnbounded {
		if h.keys[sub.key]--; h.keys[sub.key] <= 0 {
			delete(h.keys, sub.key)
		}
	}
	h.open--
	close(sub.c)
}

// Publish hands v to the subscriptions of topic and returns how many it
// ended for falling behind (their buffers full).
func (h *Hub[K, T]) Publish(topic K, v T) (lagged int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.topics[topic] {
		select {
		case sub.c <- v:
		default:
			lagged++
			sub.lagged = true
			h.drop(sub)
		}
	}
	return lagged
}

// Len returns how many subscriptions are open.
func (h *Hub[K, T]) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open
}

// Close ends every subscription and refuses new ones: the node is
// shutting down, and open streams must end for the HTTP server to drain.
func (h *Hub[K, T]) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, subs := range h.topics {
		for sub := range subs {
			h.drop(sub)
		}
	}
}
