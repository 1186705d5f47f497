package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// TestNodeStopsPartsBackwardsOnce checks the node's one list of stoppers:
// the last part started stops first, a failing part does not keep the
// others from stopping, and stopping again does nothing.
func TestNodeStopsPartsBackwardsOnce(t *testing.T) {
	t.Parallel()
	n := &node{log: slog.New(slog.DiscardHandler)}
	n.cfg.ShutdownTimeout = time.Second
	var order []string
	for _, name := range []string{"database", "queue", "workers", "http server"} {
		n.onStop(name, func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				t.Errorf("%s stopped without a shutdown deadline", name)
			}
			order = append(order, name)
			if name == "workers" {
				return errors.New("boom")
			}
			return nil
		})
	}
	n.stop(t.Context())
	n.stop(t.Context())
	want := []string{"http server", "workers", "queue", "database"}
	if !slices.Equal(order, want) {
		t.Errorf("stop order = %v, want %v", order, want)
	}
}
