package guard_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/guard"
	"github.com/sluicehq/sluice/ratelimit"
)

func TestPacerKeepsACriticalShare(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
		p, err := guard.NewPacer(guard.PacingOptions{Store: store, Provider: "sms", Rate: 10, CriticalShare: 0.2, MaxWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		// Marketing takes the general 8/s at once, then waits for its turns.
		start := time.Now()
		for range 8 {
			if w, err := p.Wait(ctx, notify.Marketing); err != nil || w != 0 {
				t.Fatalf("Wait(marketing) within the burst = %v, %v", w, err)
			}
		}
		if w, err := p.Wait(ctx, notify.Marketing); err != nil || w <= 0 {
			t.Fatalf("Wait(marketing) past the burst = %v, %v; want a wait", w, err)
		}
		// Critical still goes at once: its share is untouched.
		for range 2 {
			if w, err := p.Wait(ctx, notify.Critical); err != nil || w != 0 {
				t.Fatalf("Wait(critical) = %v, %v; want no wait", w, err)
			}
		}
		// Many at once: those whose turn is more than MaxWait away are not
		// made and wait in the queue (unavailable), nothing consumed.
		errs := make(chan error, 20)
		for range 20 {
			go func() { _, err := p.Wait(ctx, notify.Marketing); errs <- err }()
		}
		var unavailable int
		for range 20 {
			if err := <-errs; err != nil {
				if notify.ErrorClass(err) != notify.ClassUnavailable {
					t.Fatalf("Wait = %v, want unavailable", err)
				}
				unavailable++
			}
		}
		if unavailable < 10 || unavailable > 13 {
			t.Errorf("%d of 20 concurrent calls sent back to the queue, want about 12 (8/s, 1s MaxWait)", unavailable)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("pacing took %v of fake time, want about 2s", el)
		}
	})
}
