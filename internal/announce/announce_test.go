package announce_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/announce"
	"github.com/sluicehq/sluice/internal/queue"
)

// TestSignalWithoutDeadline: a context without a deadline (an API
// request's) is enough to signal; nats.go refuses to flush without one.
func TestSignalWithoutDeadline(t *testing.T) {
	t.Parallel()
	q, err := queue.Open(t.Context(), queue.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	heard := make(chan string, 1)
	bus := announce.New(q.NATS(), q.Name("test.signal"))
	stop, err := bus.Listen(func(data string) { heard <- data })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	if err := bus.Signal(context.Background()); err != nil {
		t.Fatalf("Signal: %v", err)
	}
	select {
	case got := <-heard:
		if got != "" {
			t.Errorf("heard %q, want an empty announcement", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the signal was not heard within 5s")
	}
}
