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

// TestListenOthers: a Bus listening for others hears another node's post
// and never its own, posted before and after the other's.
func TestListenOthers(t *testing.T) {
	t.Parallel()
	q, err := queue.Open(t.Context(), queue.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	mine := announce.New(q.NATS(), q.Name("test.others"))
	theirs := announce.New(q.NATS(), q.Name("test.others"))
	heard := make(chan string, 8)
	stop, err := mine.ListenOthers(func(data string) {
		select {
		case heard <- data:
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	for _, post := range []func() error{
		func() error { return mine.Post("mine-1") },
		func() error { return theirs.Post("theirs") },
		func() error { return mine.Post("mine-2") },
		func() error { return theirs.Post("end") },
	} {
		if err := post(); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) == 0 || got[len(got)-1] != "end" {
		select {
		case d := <-heard:
			got = append(got, d)
		case <-time.After(5 * time.Second):
			t.Fatalf("heard %q within 5s, want [theirs end]", got)
		}
	}
	if len(got) != 2 || got[0] != "theirs" {
		t.Errorf("heard %q, want [theirs end]: a Bus's own posts are skipped", got)
	}
}
