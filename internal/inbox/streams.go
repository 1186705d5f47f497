package inbox

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/fanout"
)

// Subscription is one open stream's feed of its user's events. Events
// arrive on C; C is closed when the subscription ends: Close was called,
// the stream fell Buffer events behind (Lagged reports it), or the
// service closed. It is safe for concurrent use.
type Subscription = fanout.Subscription[string, Event]

// Subscribe opens a feed of user's events for key (the id of the API key,
// or of the dashboard session's key, that opens the stream; "" for an
// inbox token or keyless mode, bounded per user alone). It is refused
// with ErrUserStreams, ErrKeyStreams or ErrStreams past the bounds and
// with ErrClosed once the service closed. The caller must Close it.
func (s *Service) Subscribe(user, key string) (*Subscription, error) {
	sub, err := s.streams.Subscribe(user, key)
	var full *fanout.Full
	switch {
	case err == nil:
		return sub, nil
	case errors.Is(err, fanout.ErrClosed):
		return nil, ErrClosed
	case !errors.As(err, &full):
		return nil, err
	case full.Topic:
		return nil, fmt.Errorf("%w: %d open on this node, the bound (notify.inbox.max_streams_per_user)", ErrUserStreams, s.opts.MaxStreamsPerUser)
	case full.Key:
		return nil, fmt.Errorf("%w: %d open on this node, the bound (notify.inbox.max_streams_per_key)", ErrKeyStreams, s.opts.MaxStreamsPerKey)
	default:
		return nil, fmt.Errorf("%w: %d open, the bound (notify.inbox.max_streams)", ErrStreams, s.opts.MaxStreams)
	}
}

// Receive hands e to this node's streams of e.UserID. It never blocks: a
// stream whose buffer is full is ended (its client reconnects and replays
// from the store). cmd/sluice calls it with what the cross-node bus hears.
func (s *Service) Receive(e Event) {
	e.payload = &payload{}
	s.streams.Publish(e.UserID, e)
}

// Streams returns how many streams are open on this node.
func (s *Service) Streams() int { return s.streams.Len() }

// Close ends every subscription and refuses new ones: the node is shutting
// down, and open streams must end for the HTTP server to drain.
func (s *Service) Close() { s.streams.Close() }
