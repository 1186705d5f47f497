package notify_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/guard"
	"github.com/sluicehq/sluice/ratelimit"
)

// BenchmarkProcessThroughTwilio measures deliveries per second through the
// worker (SQLite store, rendering, the guard) to a local Twilio-compatible
// server, with 32 workers, unpaced and paced at 1,000 calls/s (800/s for orders, the rest kept for critical).
func BenchmarkProcessThroughTwilio(b *testing.B) {
	for _, rate := range []float64{0, 1000} {
		b.Run(fmt.Sprintf("rate=%v", rate), func(b *testing.B) {
			api := startSMSAPI(b)
			api.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 64
			var g *guard.Provider
			bb := setup(b, func(o *notify.Options) {
				g = guarded(b, api, "twilio", o.Now)
				if rate > 0 {
					p, err := guard.NewPacer(guard.PacingOptions{Store: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}),
						Provider: "twilio", Rate: rate})
					if err != nil {
						b.Fatal(err)
					}
					g.Pacer = p
				}
				o.Providers[notify.SMS] = g
			})
			st := notify.DefaultSettings()
			st.Contacts.Phone = "+4915112345678"
			if _, err := bb.svc.PutSettings(b.Context(), "u1", st); err != nil {
				b.Fatal(err)
			}
			for range b.N {
				if _, err := bb.svc.Send(b.Context(), notify.Request{UserID: "u1", Type: "order.shipped", Channels: []notify.Channel{notify.SMS}}); err != nil {
					b.Fatal(err)
				}
			}
			jobs := bb.q.take()
			b.ResetTimer()
			processAll(b, bb.svc, jobs, 32)
			b.ReportMetric(float64(len(jobs))/b.Elapsed().Seconds(), "deliveries/s")
			if _, sent := api.counts(); sent != len(jobs) {
				b.Errorf("sent %d of %d", sent, len(jobs))
			}
		})
	}
}

// processAll has workers goroutines process jobs, and returns when every
// job is done.
func processAll(b *testing.B, svc *notify.Service, jobs []notify.Job, workers int) {
	ch := make(chan notify.Job, len(jobs)) // sends never block
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range ch {
				if err := svc.Process(b.Context(), j); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
}
