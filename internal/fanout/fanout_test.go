package fanout_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/fanout"
)

// TestSubscribeBounds: each bound refuses with a *Full naming every bound
// reached; the key "" is bounded unless KeylessUnbounded; a closed
// subscription frees its slots.
func TestSubscribeBounds(t *testing.T) {
	t.Parallel()
	h := fanout.New[string, int](fanout.Options{MaxStreams: 4, MaxPerKey: 2, MaxPerTopic: 3, Buffer: 1})
	a1, _ := h.Subscribe("a", "k")
	if _, err := h.Subscribe("a", "k"); err != nil {
		t.Fatal(err)
	}
	var full *fanout.Full
	if _, err := h.Subscribe("b", "k"); !errors.As(err, &full) || *full != (fanout.Full{Key: true}) {
		t.Fatalf("third of key k: %v, want Full{Key}", err)
	}
	if _, err := h.Subscribe("a", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe("a", "j"); !errors.As(err, &full) || *full != (fanout.Full{Topic: true}) {
		t.Fatalf("fourth of topic a: %v, want Full{Topic}", err)
	}
	if _, err := h.Subscribe("b", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe("a", "k"); !errors.As(err, &full) || *full != (fanout.Full{Node: true, Key: true, Topic: true}) {
		t.Fatalf("fifth: %v, want Full{Node, Key, Topic}", err)
	}
	a1.Close()
	a1.Close()
	if got := h.Len(); got != 3 {
		t.Fatalf("Len after Close = %d, want 3", got)
	}
	if _, err := h.Subscribe("c", ""); !errors.As(err, &full) || *full != (fanout.Full{Key: true}) {
		t.Fatalf("third keyless: %v, want Full{Key} (the key \"\" is bounded)", err)
	}

	free := fanout.New[string, int](fanout.Options{MaxStreams: 10, MaxPerKey: 1, KeylessUnbounded: true, Buffer: 1})
	for i := range 3 {
		if _, err := free.Subscribe("a", ""); err != nil {
			t.Fatalf("keyless %d with KeylessUnbounded: %v", i, err)
		}
	}
}

// TestPublishDropsTheLaggard: a subscription whose buffer is full is
// ended and reported Lagged; the others get the value; Close ends all
// and refuses new subscriptions.
func TestPublishDropsTheLaggard(t *testing.T) {
	t.Parallel()
	h := fanout.New[int, string](fanout.Options{MaxStreams: 10, MaxPerKey: 10, Buffer: 1})
	slow, _ := h.Subscribe(1, "k")
	fast, _ := h.Subscribe(1, "k")
	other, _ := h.Subscribe(2, "k")
	if n := h.Publish(1, "x"); n != 0 {
		t.Fatalf("Publish = %d lagged, want 0", n)
	}
	<-fast.C
	if n := h.Publish(1, "y"); n != 1 {
		t.Fatalf("Publish = %d lagged, want 1", n)
	}
	if got := <-slow.C; got != "x" {
		t.Fatalf("slow got %q, want x", got)
	}
	if _, ok := <-slow.C; ok || !slow.Lagged() {
		t.Fatalf("slow: channel open %v, Lagged %v; want closed and lagged", ok, slow.Lagged())
	}
	if got := <-fast.C; got != "y" || fast.Lagged() {
		t.Fatalf("fast got %q, Lagged %v", got, fast.Lagged())
	}
	h.Close()
	for _, sub := range []*fanout.Subscription[int, string]{fast, other} {
		if _, ok := <-sub.C; ok || sub.Lagged() {
			t.Fatalf("after Close: channel open %v, Lagged %v", ok, sub.Lagged())
		}
	}
	if _, err := h.Subscribe(1, "k"); !errors.Is(err, fanout.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v, want ErrClosed", err)
	}
}

// TestRefusedAndClosedErrors: Options.Refused and Options.Closed name the
// refusals in the user's words.
func TestRefusedAndClosedErrors(t *testing.T) {
	t.Parallel()
	errFull, errShut := errors.New("full"), errors.New("shut")
	var saw fanout.Full
	h := fanout.New[int, int](fanout.Options{MaxStreams: 1, MaxPerKey: 1, Buffer: 1, Closed: errShut,
		Refused: func(f fanout.Full) error { saw = f; return errFull }})
	if _, err := h.Subscribe(1, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe(1, "k"); err != errFull || saw != (fanout.Full{Node: true, Key: true}) {
		t.Fatalf("Subscribe past the bounds = %v (Refused saw %+v), want full with Node and Key", err, saw)
	}
	h.Close()
	if _, err := h.Subscribe(1, "k"); err != errShut {
		t.Fatalf("Subscribe after Close = %v, want shut", err)
	}
}
