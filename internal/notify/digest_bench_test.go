package notify_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/notify"
)

// BenchmarkSendDigested measures accepted notifications per second on
// SQLite, 64 senders at once, for a type sent event by event (group
// committed) and for one digested (one transaction per event, joining the
// digest under its row lock), to one user and to many.
func BenchmarkSendDigested(b *testing.B) {
	for _, digested := range []bool{false, true} {
		for _, users := range []int{1, 1000} {
			b.Run(fmt.Sprintf("digested=%v/users=%d", digested, users), func(b *testing.B) {
				bb := setup(b, nil)
				tpl := newsTemplate("1h", notify.MaxDigestItems)
				if !digested {
					tpl.Digest = nil
				}
				if _, err := bb.svc.PutTemplate(b.Context(), tpl); err != nil {
					b.Fatal(err)
				}
				b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
				b.ResetTimer()
				var i atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						user := fmt.Sprint("u", i.Add(1)%int64(users))
						if _, err := bb.svc.Send(b.Context(), news(user, "t", notify.Email)); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
			})
		}
	}
}
