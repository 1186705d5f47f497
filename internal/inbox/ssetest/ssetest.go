// Package ssetest reads Server-Sent Event streams in tests: the inbox's
// GET /v1/users/{id}/inbox/stream, from the handler's tests and from a
// running node's.
package ssetest

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"
)

// Event is one event read from a stream; heartbeats (comment lines) have
// Event ":".
type Event struct{ ID, Event, Data string }

// Read parses the events of body onto the returned channel (buffered for
// size events), which is closed when body ends.
func Read(body io.Reader, size int) <-chan Event {
	events := make(chan Event, size)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(body)
		var e Event
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if e != (Event{}) {
					events <- e
				}
				e = Event{}
			case strings.HasPrefix(line, ":"):
				e.Event = ":"
			case strings.HasPrefix(line, "id: "):
				e.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				e.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				e.Data = line[6:]
			}
		}
	}()
	return events
}

// Next returns the next event named event from events, skipping others,
// and fails the test when the stream ends or none comes within d.
func Next(t testing.TB, events <-chan Event, event string, d time.Duration) Event {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended waiting for a %q event", event)
			}
			if e.Event == event {
				return e
			}
		case <-deadline:
			t.Fatalf("no %q event within %s", event, d)
		}
	}
}

// Ends reports whether events ends (its channel closes) within d; the
// events read meanwhile, heartbeats too, are dropped.
func Ends(events <-chan Event, d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}
