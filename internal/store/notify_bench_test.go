package store_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
)

// BenchmarkCreateNotification measures concurrent CreateNotification
// calls (a notification and four deliveries each), with and without group
// commit, on SQLite and PostgreSQL: the write path of POST
// /v1/notifications without HTTP.
func BenchmarkCreateNotification(b *testing.B) {
	for _, engine := range []string{"sqlite", "postgres"} {
		for _, batch := range []int{1, 512} {
			b.Run(fmt.Sprintf("%s/maxbatch=%d", engine, batch), func(b *testing.B) {
				opts := store.Options{DataDir: filepath.Join(b.TempDir(), "data"), MaxBatch: batch}
				if engine == "postgres" {
					opts = store.Options{URL: enginetest.PostgresSchema(b, enginetest.PostgresURL(b)), MaxBatch: batch, MaxOpenConns: 8}
				}
				db := mustOpen(b, opts)
				if _, err := db.Migrate(b.Context()); err != nil {
					b.Fatal(err)
				}
				var seq atomic.Int64
				now := time.Now()
				b.SetParallelism(32) // 32 x GOMAXPROCS concurrent writers, as concurrent requests are
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						id := fmt.Sprintf("ntf_%d", seq.Add(1))
						n := notify.Notification{ID: id, RequestHash: "h", UserID: "u", Type: "order.shipped", Category: notify.Orders,
							Data: json.RawMessage(`{"order":"#42"}`), CreatedAt: now}
						var ds []notify.Delivery
						for _, ch := range notify.Channels {
							ds = append(ds, notify.Delivery{NotificationID: id, Channel: ch, UserID: "u", Category: notify.Orders,
								Provider: "outbox", Status: notify.StatusQueued, CreatedAt: now, UpdatedAt: now})
						}
						if _, _, err := db.CreateNotification(b.Context(), n, ds); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				batches, ops, largest := db.BatchStats().Snapshot()
				b.ReportMetric(float64(ops)/float64(max(batches, 1)), "writes/tx")
				b.ReportMetric(float64(largest), "largest-tx")
				_ = sync.Mutex{}
			})
		}
	}
}
