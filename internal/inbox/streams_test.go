package inbox_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/inbox"
)

// TestSubscribeBounds: streams are bounded per user and per node, and a
// closed subscription frees its place.
func TestSubscribeBounds(t *testing.T) {
	t.Parallel()
	s := inbox.New(inbox.Options{MaxStreams: 3, MaxStreamsPerUser: 2})
	a1, err := s.Subscribe("a", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Subscribe("a", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Subscribe("a", ""); !errors.Is(err, inbox.ErrUserStreams) {
		t.Errorf("a's third stream: %v, want ErrUserStreams", err)
	}
	if _, err := s.Subscribe("b", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Subscribe("c", ""); !errors.Is(err, inbox.ErrStreams) {
		t.Errorf("a fourth stream on the node: %v, want ErrStreams", err)
	}
	a1.Close()
	a1.Close() // twice is harmless
	if s.Streams() != 2 {
		t.Errorf("Streams() = %d after closing one of 3, want 2", s.Streams())
	}
	if _, err := s.Subscribe("c", ""); err != nil {
		t.Errorf("after a close: %v, want room for one more", err)
	}
}

// TestReceiveRoutesAndDropsLaggards: an event reaches its user's streams
// only; a stream that falls Buffer events behind is ended, not waited
// for; Close ends every stream.
func TestReceiveRoutesAndDropsLaggards(t *testing.T) {
	t.Parallel()
	s := inbox.New(inbox.Options{Buffer: 2})
	a, _ := s.Subscribe("a", "")
	b, _ := s.Subscribe("b", "")
	s.Receive(inbox.Event{Kind: inbox.KindUnread, UserID: "a", Unread: 1})
	if e := <-a.C; e.Unread != 1 {
		t.Errorf("a got %+v", e)
	}
	if len(b.C) != 0 {
		t.Error("b got a's event")
	}
	for i := range 3 { // b reads nothing: the third overflows its buffer
		s.Receive(inbox.Event{Kind: inbox.KindUnread, UserID: "b", Unread: i})
	}
	n := 0
	for range b.C { // the two buffered events, then the close
		n++
	}
	if n != 2 || !b.Lagged() || a.Lagged() {
		t.Errorf("b: %d events, lagged %v (a lagged %v); want 2 events then ended as lagged", n, b.Lagged(), a.Lagged())
	}
	s.Close()
	if _, ok := <-a.C; ok {
		t.Error("a is still open after Close")
	}
	if s.Streams() != 0 {
		t.Errorf("Streams() = %d after Close", s.Streams())
	}
}

// TestPayloadOnce: the streams an event reaches share one encoding.
func TestPayloadOnce(t *testing.T) {
	t.Parallel()
	s := inbox.New(inbox.Options{})
	subs := make([]*inbox.Subscription, 3)
	for i := range subs {
		subs[i], _ = s.Subscribe("a", "")
	}
	s.Receive(inbox.Event{Kind: inbox.KindUnread, UserID: "a", Unread: 7})
	calls := 0
	for _, sub := range subs {
		e := <-sub.C
		if got := string(e.Payload(func(inbox.Event) []byte { calls++; return []byte("x") })); got != "x" {
			t.Errorf("Payload = %q", got)
		}
	}
	if calls != 1 {
		t.Errorf("encoded %d times for 3 streams, want once", calls)
	}
}
