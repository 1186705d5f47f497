package shorten_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/internal/shorten"
)

// TestFlushPanicKeepsRecording: a flush that panics (here the country
// lookup, on a poisoned hit) loses its batch and is reported on the
// "clicks" surface; the flusher goes on and records the next hits.
func TestFlushPanicKeepsRecording(t *testing.T) {
	t.Parallel()
	const poisoned = "203.0.113.66"
	var (
		mu       sync.Mutex
		counted  = map[string]int{}
		recorded []shorten.Click
	)
	b := setup(t, func(o *shorten.Options) {
		o.FlushInterval = 10 * time.Millisecond
		o.Country = func(client string) string {
			if client == poisoned {
				panic("poisoned client " + client + ": the panic a bug would cause")
			}
			return ""
		}
		o.Panics = &panics.Reporter{Logger: slog.New(slog.DiscardHandler), Count: func(s string) { mu.Lock(); counted[s]++; mu.Unlock() }}
		o.OnRecorded = func(c []shorten.Click) { mu.Lock(); recorded = append(recorded, c...); mu.Unlock() }
	})
	l := b.create(t, shorten.CreateRequest{URL: "https://example.com/page"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.svc.Run(ctx) }()

	b.svc.RecordHit(shorten.Hit{LinkID: l.ID, Code: l.Code, UserAgent: browser, Client: poisoned})
	if _, err := enginetest.Poll(time.Minute, func() error {
		mu.Lock()
		defer mu.Unlock()
		if counted[panics.Clicks] != 1 {
			return errors.New("the poisoned flush was not reported")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.svc.RecordHit(shorten.Hit{LinkID: l.ID, Code: l.Code, UserAgent: browser, Client: "198.51.100.7"})
	if _, err := enginetest.Poll(time.Minute, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(recorded) != 1 {
			return errors.New("the hit after the panic was not recorded")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within 1m")
	}
}
