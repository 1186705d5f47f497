package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/notify"
)

// NewDeliveries registers the notification pipeline's delivery series on
// reg and returns the observer that feeds them, for notify.Options.Observe.
func NewDeliveries(reg prometheus.Registerer) func(notify.Observation) {
	outcomes := counterVec("sluice_notify_deliveries_total",
		"Delivery outcomes stored, by channel, category and status (queued means a retry was scheduled, canceled a DELETE of the notification).", "channel", "category", "status")
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_notify_delivery_seconds",
		Help:    "Time from acceptance to a delivery's sent (or final) outcome, by category.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"category", "status"})
	takenOver := counterVec("sluice_notify_claims_taken_over_total",
		"Deliveries whose lapsed claim a worker took over (the worker holding it stopped renewing it mid-call): each may have gone to its provider twice.", "channel", "category")
	reg.MustRegister(outcomes, latency, takenOver)
	return func(o notify.Observation) {
		if o.TakenOver {
			takenOver.WithLabelValues(string(o.Channel), string(o.Category)).Inc()
			return
		}
		outcomes.WithLabelValues(string(o.Channel), string(o.Category), string(o.Status)).Inc()
		if o.Status != notify.StatusSuppressed && o.Status != notify.StatusQueued && o.Status != notify.StatusCanceled {
			latency.WithLabelValues(string(o.Category), string(o.Status)).Observe(o.Latency.Seconds())
		}
	}
}

// NewEmailHits registers the email tracking counter and returns
// notify.EmailTracking.Observe.
func NewEmailHits(reg prometheus.Registerer) func(kind, result string) {
	hits := counterVec("sluice_notify_email_hits_total",
		"Hits on email tracked links (kind click) and open pixels (kind open), by result: human, or the bot reason (scanner, preview, head, network, early, ...).", "kind", "result")
	reg.MustRegister(hits)
	return func(kind, result string) { hits.WithLabelValues(kind, result).Inc() }
}
