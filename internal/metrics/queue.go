package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/notify"
)

// QueueLag exports, per channel x category queue, the age of the oldest
// job not yet handled: the number to alert on when deliveries fall
// behind, or stop (a stalled consumer keeps its jobs in the queue, where
// the recovery sweep leaves them). It asks the queue at scrape time. It is
// a prometheus.Collector; register it with the node's registry.
type QueueLag struct {
	q    notify.QueueHorizon
	now  func() time.Time
	desc *prometheus.Desc
}

var _ prometheus.Collector = (*QueueLag)(nil)

// NewQueueLag returns the collector of q's lag.
func NewQueueLag(q notify.QueueHorizon) *QueueLag {
	return &QueueLag{q: q, now: time.Now, desc: prometheus.NewDesc("sluice_notify_queue_oldest_job_seconds",
		"Age of the oldest job waiting in a channel x category queue (0 when it is empty).",
		[]string{"channel", "category"}, nil)}
}

// Describe implements prometheus.Collector.
func (l *QueueLag) Describe(ch chan<- *prometheus.Desc) { ch <- l.desc }

// Collect implements prometheus.Collector. A queue that cannot be asked
// within the scrape's budget is left out of that scrape.
func (l *QueueLag) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, c := range notify.Channels {
		for _, cat := range notify.Categories {
			h, err := l.q.Horizon(ctx, c, cat)
			if err != nil {
				continue
			}
			ch <- prometheus.MustNewConstMetric(l.desc, prometheus.GaugeValue, max(0, l.now().Sub(h).Seconds()), string(c), string(cat))
		}
	}
}
