package guard_test

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/guard"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// TestPacingIsSharedAcrossNodesOnRedis runs two pacers for one provider,
// each on its own Redis connection and store as two nodes would: together
// they keep to the provider's rate, not twice it.
func TestPacingIsSharedAcrossNodesOnRedis(t *testing.T) {
	t.Parallel()
	url := enginetest.RedisURL(t)
	prefix := "test:" + rand.Text()[:10] + ":"
	var pacers []*guard.Pacer
	for range 2 {
		rc := enginetest.RedisClient(t, url)
		st, err := redisstore.New(rc, redisstore.Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		// 50/s: 40 general (burst 40) and 10 kept for critical. A wait
		// over 100ms goes back to the queue.
		p, err := guard.NewPacer(guard.PacingOptions{Store: st, Provider: "twilio", Rate: 50, MaxWait: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		pacers = append(pacers, p)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range 200 {
		wg.Go(func() {
			if _, err := pacers[i%2].Wait(context.Background(), notify.Marketing); err == nil {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	// Within the first moments, both nodes together get the general burst
	// (40) plus what refills while they wait (at most 100ms plus the
	// run's duration at 40/s), never 2 x 40.
	limit := 40 + int64(40*(time.Since(start)+100*time.Millisecond).Seconds()) + 1
	if n := admitted.Load(); n < 40 || n > limit {
		t.Errorf("two nodes admitted %d marketing calls, want 40 to %d (one shared bucket)", n, limit)
	}
	// Critical still has its own share on both nodes together.
	var crit int
	for i := range 10 {
		if w, err := pacers[i%2].Wait(context.Background(), notify.Critical); err == nil && w == 0 {
			crit++
		}
	}
	if crit < 9 {
		t.Errorf("critical calls let through at once = %d of 10, want its share", crit)
	}
}
