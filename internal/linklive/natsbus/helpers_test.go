package natsbus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/linklive/natsbus"
	"github.com/sluicehq/sluice/internal/queue"
)

// openBus starts an embedded NATS in a temporary dir and returns a Bus on
// its live hits stream (a minute of replay), publishing (Run), and the
// stream; all of it stops when the test ends.
func openBus(t *testing.T) (*natsbus.Bus, jetstream.Stream) {
	t.Helper()
	q, err := queue.Open(t.Context(), queue.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	stream, err := q.EnsureStream(t.Context(), natsbus.StreamConfig(q.Name("LINK_HITS"), q.Name("links.hits"), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	bus := natsbus.NewBus(q.NATS(), stream, q.Name("links.hits"), nil)
	runCtx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- bus.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-ran })
	return bus, stream
}
