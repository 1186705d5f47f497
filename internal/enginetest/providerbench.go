package enginetest

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/notify"
)

// BenchSend is a provider's benchmark: it sends m through p from parallel
// goroutines b.N times in all and reports messages per second (msgs/s).
func BenchSend(b *testing.B, p notify.Provider, m notify.Message) {
	b.Helper()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := p.Send(context.Background(), m); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
