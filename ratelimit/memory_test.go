package ratelimit_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Parallel()
	ratelimittest.Exercise(t, ratelimittest.Harness{
		NewStore: func(t *testing.T, now func() time.Time) ratelimit.Store {
			return ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: now})
		},
		Idle: func(t *testing.T, store ratelimit.Store, clock *ratelimittest.Clock, p *ratelimit.Policy, key string, resetAfter time.Duration) {
			t.Helper()
			m := store.(*ratelimit.MemoryStore)
			m.Sweep()
			if n := m.Len(); n != 0 {
				t.Errorf("MemoryStore holds %d keys after they went idle and Sweep, want 0", n)
			}
		},
	})
}
