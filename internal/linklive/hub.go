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
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/fanout"
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
	opts  Options
	links *fanout.Hub[int64, *Hit] // link id -> this node's streams

	sent, dropped atomic.Uint64
}

// NewHub returns a Hub for opts.
func NewHub(opts Options) *Hub {
	opts.MaxStreams = cmp.Or(opts.MaxStreams, 1000)
	opts.Buffer = cmp.Or(opts.Buffer, 256)
	opts.MaxPerCaller = cmp.Or(opts.MaxPerCaller, 20)
	return &Hub{opts: opts, links: fanout.New[int64, *Hit](fanout.Options{
		MaxStreams: opts.MaxStreams, MaxPerKey: opts.MaxPerCaller, Buffer: opts.Buffer,
		Refused: opts.refused, Closed: ErrClosed})}
}

// Subscription is one stream's feed of one link's hits, on C: pointers
// the link's every subscription shares (read only), so a buffer costs a
// word a hit rather than a Hit. C is closed when the subscription ends:
// Close was called, the stream fell Buffer hits behind (Lagged), or the
// hub closed.
type Subscription = fanout.Subscription[int64, *Hit]

// Subscribe opens a feed of link's hits for caller (the key that opens
// the stream), refused with ErrStreams past MaxStreams, ErrCallerStreams
// past MaxPerCaller and ErrClosed once the hub closed. The caller must
// Close it.
func (h *Hub) Subscribe(linkID int64, caller string) (*Subscription, error) {
	return h.links.Subscribe(linkID, caller)
}

// refused is the error of a stream refused at the bounds full names.
func (o Options) refused(full fanout.Full) error {
	if full.Node {
		return fmt.Errorf("%w (links.live.max_streams: %d)", ErrStreams, o.MaxStreams)
	}
	return fmt.Errorf("%w (links.live.max_streams_per_key: %d)", ErrCallerStreams, o.MaxPerCaller)
}

// Receive hands hit to the subscriptions of its link. A subscription
// whose buffer is full is ended, the hit counted as dropped.
func (h *Hub) Receive(hit Hit) {
	if n := h.links.Publish(hit.LinkID, &hit); n > 0 {
		h.dropped.Add(uint64(n))
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
func (h *Hub) Streams() int { return h.links.Len() }

// Close ends every subscription and refuses new ones: the node is
// shutting down, and open streams must end for the HTTP server to drain.
func (h *Hub) Close() { h.links.Close() }
