package inbox

import (
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
	return s.streams.Subscribe(user, key)
}

// refused is the error of a stream refused at the bounds full names.
func (o Options) refused(full fanout.Full) error {
	switch {
	case full.Topic:
		return fmt.Errorf("%w: %d open on this node, the bound (notify.inbox.max_streams_per_user)", ErrUserStreams, o.MaxStreamsPerUser)
	case full.Key:
		return fmt.Errorf("%w: %d open on this node, the bound (notify.inbox.max_streams_per_key)", ErrKeyStreams, o.MaxStreamsPerKey)
	default:
		return fmt.Errorf("%w: %d open, the bound (notify.inbox.max_streams)", ErrStreams, o.MaxStreams)
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
