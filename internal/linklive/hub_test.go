package linklive_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/linklive"
)

// TestSubscribePerCaller: one caller's streams are bounded apart from the
// node's, so one key cannot take every slot; a closed one frees its place.
func TestSubscribePerCaller(t *testing.T) {
	t.Parallel()
	h := linklive.NewHub(linklive.Options{MaxStreams: 10, MaxPerCaller: 2})
	a, err := h.Subscribe(1, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe(2, "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe(3, "k1"); !errors.Is(err, linklive.ErrCallerStreams) {
		t.Errorf("k1's third stream: %v, want ErrCallerStreams", err)
	}
	if _, err := h.Subscribe(3, "k2"); err != nil {
		t.Errorf("another key's stream: %v, want room", err)
	}
	a.Close()
	if _, err := h.Subscribe(3, "k1"); err != nil {
		t.Errorf("k1 after closing one: %v, want room", err)
	}
}

// TestSubscribeBound: streams are bounded per node, and a closed
// subscription frees its place.
func TestSubscribeBound(t *testing.T) {
	t.Parallel()
	h := linklive.NewHub(linklive.Options{MaxStreams: 2})
	a, err := h.Subscribe(1, "k1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe(1, "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Subscribe(2, "k1"); !errors.Is(err, linklive.ErrStreams) {
		t.Errorf("a third stream: %v, want ErrStreams", err)
	}
	a.Close()
	a.Close() // twice is harmless
	if got := h.Streams(); got != 1 {
		t.Errorf("Streams() = %d after closing one of 2, want 1", got)
	}
	if _, err := h.Subscribe(2, "k1"); err != nil {
		t.Errorf("after a close: %v, want room for one more", err)
	}
	h.Close()
	if _, err := h.Subscribe(3, "k1"); !errors.Is(err, linklive.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if got := h.Streams(); got != 0 {
		t.Errorf("Streams() = %d after Close, want 0", got)
	}
}

// TestReceiveRoutesAndCutsOffLaggards: a hit reaches its link's streams
// only; a stream that falls Buffer hits behind is ended (never waited
// for) and the hit counted as dropped, while another stream of the link
// that reads keeps going.
func TestReceiveRoutesAndCutsOffLaggards(t *testing.T) {
	t.Parallel()
	h := linklive.NewHub(linklive.Options{Buffer: 2})
	slow, _ := h.Subscribe(1, "k1")
	fast, _ := h.Subscribe(1, "k1")
	other, _ := h.Subscribe(2, "k1")
	done := make(chan struct{})
	go func() {
		for i := range 3 {
			h.Receive(linklive.Hit{LinkID: 1, ID: uint64(i + 1)})
			if got := <-fast.C; got.ID != uint64(i+1) {
				t.Errorf("fast got id %d, want %d", got.ID, i+1)
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Receive blocked on a slow stream")
	}
	if len(other.C) != 0 {
		t.Error("link 2's stream got link 1's hit")
	}
	n := 0
	for range slow.C { // the two buffered hits, then the close
		n++
	}
	if n != 2 || !slow.Lagged() {
		t.Errorf("slow stream: %d hits, lagged %v; want 2 and cut off", n, slow.Lagged())
	}
	if fast.Lagged() {
		t.Error("the stream that read was cut off")
	}
	if _, dropped := h.Counts(); dropped != 1 {
		t.Errorf("dropped = %d, want 1", dropped)
	}
	if got := h.Streams(); got != 2 {
		t.Errorf("Streams() = %d, want 2 (the slow one freed its place)", got)
	}
}
