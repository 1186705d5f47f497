package natsbus_test

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/linklive"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/internal/shorten"
)

// TestListenFuncRecoveredHit: with a receiver wrapped by panics.Func (as
// the node wraps its hub), a hit whose fan-out panics is dropped and
// counted, and the next hits are received on the same consumer.
func TestListenFuncRecoveredHit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bus, _ := openBus(t)
	var counted atomic.Int64
	rep := &panics.Reporter{Logger: slog.New(slog.DiscardHandler), Count: func(string) { counted.Add(1) }}
	got := make(chan int64, 10)
	stop, err := bus.ListenFunc(ctx, panics.Func(rep, panics.Announce, func(h linklive.Hit) {
		if h.LinkID == 666 {
			panic("poisoned hit")
		}
		got <- h.LinkID
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	at := time.Now()
	bus.Publish([]shorten.Click{{LinkID: 666, At: at}})
	bus.Publish([]shorten.Click{{LinkID: 7, At: at}})
	select {
	case id := <-got:
		if id != 7 {
			t.Errorf("received link %d, want 7", id)
		}
	case <-time.After(time.Minute):
		t.Fatal("the hit after the poisoned one was not received within 1m")
	}
	if n := counted.Load(); n != 1 {
		t.Errorf("counted %d panics, want 1", n)
	}
}
