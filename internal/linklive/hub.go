// Package linklive carries a link's recorded hits, as the click flusher
// records them, to the live stats streams open on every node (GET
// /v1/links/{code}/stats/stream): a Hub fans the hits out to this node's
// streams, each with a bounded buffer. The hits cross nodes through an
// adapter (natsbus, on a JetStream stream, which also keeps recent hits
// for a stream that reconnects: Options.Replay); this package imports no
// infrastructure.
package linklive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

// Hit is one recorded hit of a link, human click or bot hit, with its
// dimensions. ID is its place in the stream of every link's hits (the
// live stream's event id): increasing, not contiguous for one link.
type Hit struct {
	ID        uint64    `json:"-"`
	LinkID    int64     `json:"-"`
	At        time.Time `json:"at"`
	Bot       bool      `json:"bot"`
	BotReason string    `json:"bot_reason,omitempty"`
	Source    string    `json:"source"`
	Country   string    `json:"country,omitempty"`
	Device    string    `json:"device,omitempty"`
	OS        string    `json:"os,omitempty"`
	Referrer  string    `json:"referrer,omitempty"`
	Language  string    `json:"language,omitempty"`
	Target    string    `json:"target,omitempty"`
}

// FromClick is the hit of a recorded click.
func FromClick(c shorten.Click) Hit {
	return Hit{LinkID: c.LinkID, At: c.At.UTC(), Bot: c.Bot, BotReason: c.Reason, Source: c.Source.String(),
		Country: c.Country, Device: c.Device, OS: c.OS, Referrer: c.Referrer, Language: c.Language, Target: c.Target}
}

// Errors of Subscribe.
var (
	// ErrStreams: the node holds Options.MaxStreams streams already.
	ErrStreams = errors.New("this node holds as many live link streams as it may; try again later")
	// ErrCallerStreams: the caller holds Options.MaxPerCaller streams on
	// this node already.
	ErrCallerStreams = errors.New("this key holds as many live link streams on this node as it may; close one or try again later")
	// ErrClosed: the hub is closed (the node is shutting down).
	ErrClosed = errors.New("live link streams are closed")
)

// Options configure a Hub. Every field is optional.
type Options struct {
	// MaxStreams bounds the subscriptions open at once (default 1,000).
	MaxStreams int
	// MaxPerCaller bounds those of one caller (an API key), so one key
	// cannot take every slot (default 20).
	MaxPerCaller int
	// Buffer bounds the hits one subscription holds unread (default
	// 256); a subscription that falls further behind is ended.
	Buffer int
	// Replay returns the hits of link after the id after (at most limit, oldest
	// first) that the feed still keeps, for a stream that resumes. If nil,
	// there are none (Replay returns nothing).
	Replay func(ctx context.Context, linkID int64, after uint64, limit int) ([]Hit, error)
}

// Hub fans hits out to the subscriptions of this node. Receive never
// blocks: a subscription whose buffer is full is ended, so a slow client
// never holds the flusher nor the other streams. It is safe for
// concurrent use; the zero value is not usable (use NewHub).
type Hub struct {
	opts   Options
	mu     sync.Mutex
	links  map[int64]map[*Subscription]struct{}
	open   int
	per    map[string]int // caller -> subscriptions open
	closed bool

	sent, dropped atomic.Uint64
}

// NewHub returns a Hub for opts.
func NewHub(opts Options) *Hub {
	opts.MaxStreams = cmp.Or(opts.MaxStreams, 1000)
	opts.Buffer = cmp.Or(opts.Buffer, 256)
	opts.MaxPerCaller = cmp.Or(opts.MaxPerCaller, 20)
	return &Hub{opts: opts, links: map[int64]map[*Subscription]struct{}{}, per: map[string]int{}}
}

// Subscription is one stream's feed of one link's hits, on C: pointers
// the link's every subscription shares (read only), so a buffer costs a
// word a hit rather than a Hit. C is closed when the subscription ends:
// Close was called, the stream fell Buffer hits behind (Lagged), or the
// hub closed.
type Subscription struct {
	C      <-chan *Hit
	c      chan *Hit
	link   int64
	caller string
	hub    *Hub
	lagged bool // under hub.mu
}

// Subscribe opens a feed of link's hits for caller (the key that opens
// the stream), refused with ErrStreams past MaxStreams, ErrCallerStreams
// past MaxPerCaller and ErrClosed once the hub closed. The caller must
// Close it.
func (h *Hub) Subscribe(linkID int64, caller string) (*Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return nil, ErrClosed
	case h.open >= h.opts.MaxStreams:
		return nil, fmt.Errorf("%w (links.live.max_streams: %d)", ErrStreams, h.opts.MaxStreams)
	case h.per[caller] >= h.opts.MaxPerCaller:
		return nil, fmt.Errorf("%w (links.live.max_streams_per_key: %d)", ErrCallerStreams, h.opts.MaxPerCaller)
	}
	c := make(chan *Hit, h.opts.Buffer)
	sub := &Subscription{C: c, c: c, link: linkID, caller: caller, hub: h}
	h.per[caller]++
	if h.links[linkID] == nil {
		h.links[linkID] = map[*Subscription]struct{}{}
	}
	h.links[linkID][sub] = struct{}{}
	h.open++
	return sub, nil
}

// Close ends the subscription; closing twice is harmless.
func (sub *Subscription) Close() {
	sub.hub.mu.Lock()
	defer sub.hub.mu.Unlock()
	sub.hub.drop(sub)
}

// Lagged reports whether the subscription ended for falling behind.
func (sub *Subscription) Lagged() bool {
	sub.hub.mu.Lock()
	defer sub.hub.mu.Unlock()
	return sub.lagged
}

// drop removes sub and closes its channel, once. h.mu is held.
func (h *Hub) drop(sub *Subscription) {
	subs := h.links[sub.link]
	if _, ok := subs[sub]; !ok {
		return
	}
	delete(subs, sub)
	if len(subs) == 0 {
		delete(h.links, sub.link)
	}
	h.open--
	if h.per[sub.caller]--; h.per[sub.caller] <= 0 {
		delete(h.per, sub.caller)
	}
	close(sub.c)
}

// Receive hands hit to the subscriptions of its link. A subscription
// whose buffer is full is ended, the hit counted as dropped.
func (h *Hub) Receive(hit Hit) {
	h.mu.Lock()
	defer h.mu.Unlock()
	subs := h.links[hit.LinkID]
	if len(subs) == 0 {
		return
	}
	p := &hit
	for sub := range subs {
		select {
		case sub.c <- p:
		default:
			h.dropped.Add(1)
			sub.lagged = true
			h.drop(sub)
		}
	}
}

// Replay returns what Options.Replay does, nothing without one.
func (h *Hub) Replay(ctx context.Context, linkID int64, after uint64, limit int) ([]Hit, error) {
	if h.opts.Replay == nil {
		return nil, nil
	}
	return h.opts.Replay(ctx, linkID, after, limit)
}

// Sent counts n hits written to a client (the streams call it).
func (h *Hub) Sent(n int) { h.sent.Add(uint64(n)) }

// Counts returns the hits sent to clients and those dropped (for a
// stream too slow to take them) since the hub was made.
func (h *Hub) Counts() (sent, dropped uint64) { return h.sent.Load(), h.dropped.Load() }

// Streams returns how many subscriptions are open.
func (h *Hub) Streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open
}

// Close ends every subscription and refuses new ones: the node is
// shutting down, and open streams must end for the HTTP server to drain.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, subs := range h.links {
		for sub := range subs {
			h.drop(sub)
		}
	}
}
