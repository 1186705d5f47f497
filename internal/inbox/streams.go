package inbox

import "fmt"

// Subscription is one open stream's feed of its user's events. Events
// arrive on C; C is closed when the subscription ends: Close was called,
// the stream fell Buffer events behind (Lagged reports it), or the
// service closed. It is safe for concurrent use.
type Subscription struct {
	C      <-chan Event
	c      chan Event
	user   string
	key    string // the API key that opened it; "" for an inbox token
	svc    *Service
	lagged bool // set, under svc.mu, when ended for falling behind
}

// Subscribe opens a feed of user's events for key (the id of the API key,
// or of the dashboard session's key, that opens the stream; "" for an
// inbox token or keyless mode, bounded per user alone). It is refused
// with ErrUserStreams, ErrKeyStreams or ErrStreams past the bounds and
// with ErrClosed once the service closed. The caller must Close it.
func (s *Service) Subscribe(user, key string) (*Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrClosed
	case len(s.users[user]) >= s.opts.MaxStreamsPerUser:
		return nil, fmt.Errorf("%w: %d open on this node, the bound (notify.inbox.max_streams_per_user)", ErrUserStreams, s.opts.MaxStreamsPerUser)
	case key != "" && s.keys[key] >= s.opts.MaxStreamsPerKey:
		return nil, fmt.Errorf("%w: %d open on this node, the bound (notify.inbox.max_streams_per_key)", ErrKeyStreams, s.opts.MaxStreamsPerKey)
	case s.open >= s.opts.MaxStreams:
		return nil, fmt.Errorf("%w: %d open, the bound (notify.inbox.max_streams)", ErrStreams, s.opts.MaxStreams)
	}
	c := make(chan Event, s.opts.Buffer)
	sub := &Subscription{C: c, c: c, user: user, key: key, svc: s}
	if key != "" {
		s.keys[key]++
	}
	if s.users[user] == nil {
		s.users[user] = map[*Subscription]struct{}{}
	}
	s.users[user][sub] = struct{}{}
	s.open++
	return sub, nil
}

// Close ends the subscription; closing twice is harmless.
func (sub *Subscription) Close() {
	sub.svc.mu.Lock()
	defer sub.svc.mu.Unlock()
	sub.svc.drop(sub)
}

// Lagged reports whether the subscription ended because its stream fell
// behind.
func (sub *Subscription) Lagged() bool {
	sub.svc.mu.Lock()
	defer sub.svc.mu.Unlock()
	return sub.lagged
}

// drop removes sub and closes its channel, once. s.mu is held.
func (s *Service) drop(sub *Subscription) {
	subs := s.users[sub.user]
	if _, ok := subs[sub]; !ok {
		return
	}
	delete(subs, sub)
	if len(subs) == 0 {
		delete(s.users, sub.user)
	}
	if sub.key != "" {
		if s.keys[sub.key]--; s.keys[sub.key] <= 0 {
			delete(s.keys, sub.key)
		}
	}
	s.open--
	close(sub.c)
}

// Receive hands e to this node's streams of e.UserID. It never blocks: a
// stream whose buffer is full is ended (its client reconnects and replays
// from the store). cmd/sluice calls it with what the cross-node bus hears.
func (s *Service) Receive(e Event) {
	e.payload = &payload{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.users[e.UserID] {
		select {
		case sub.c <- e:
		default:
			sub.lagged = true
			s.drop(sub)
		}
	}
}

// Streams returns how many streams are open on this node.
func (s *Service) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

// Close ends every subscription and refuses new ones: the node is shutting
// down, and open streams must end for the HTTP server to drain.
func (s *Service) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, subs := range s.users {
		for sub := range subs {
			s.drop(sub)
		}
	}
}
