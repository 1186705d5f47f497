package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/shorten"
)

// bindLinkAnalytics binds the shortener's visit-limit and conversion
// events to their series.
func bindLinkAnalytics(reg prometheus.Registerer, m *shorten.Metrics) {
	visits := counterVec("sluice_links_limited_visits_total",
		"Human visits of visit-limited links, by result: spent (let through, one of max_visits) or refused (none left: 410 or the fallback URL).", "result")
	conversions := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_links_conversions_total",
		Help: "Conversions recorded against click ids (POST /v1/conversions; repeats of a (click_id, event) are not counted).",
	})
	if reg != nil {
		reg.MustRegister(visits, conversions)
	}
	m.VisitSpent = visits.WithLabelValues("spent").Inc
	m.VisitRefused = visits.WithLabelValues("refused").Inc
	m.Converted = conversions.Inc
}
