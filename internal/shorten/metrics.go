package shorten

import "github.com/prometheus/client_golang/prometheus"

// metrics are the shortener's Prometheus series. Label values are resolved
// once here, so the redirect path pays an atomic add per series.
type metrics struct {
	found, expired, notFound, limited prometheus.Counter
	localHit, localMiss               prometheus.Counter
	sharedHit, sharedMiss, sharedErr  prometheus.Counter
	humanClicks, botHits              prometheus.Counter
	dropFull, dropStore               prometheus.Counter
	created, purged                   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, buffered func() float64) *metrics {
	redirects := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_links_redirects_total",
		Help: "Short link lookups on the redirect path, by result: found, expired, not_found, limited (unknown-code lookups over the per-client limit).",
	}, []string{"result"})
	cacheLookups := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_links_cache_lookups_total",
		Help: "Redirect-path cache lookups, by level (local, shared) and result (hit, miss, error).",
	}, []string{"level", "result"})
	clicks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_links_hits_recorded_total",
		Help: "Link hits written to the store, by kind: human (counted as clicks) or bot.",
	}, []string{"kind"})
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_links_clicks_dropped_total",
		Help: "Link hits not recorded, by reason: buffer_full (the redirect did not wait) or store_error.",
	}, []string{"reason"})
	created := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_links_created_total", Help: "Short links created."})
	purged := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_links_purged_total", Help: "Expired short links purged."})
	buffer := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sluice_links_click_buffer",
		Help: "Link hits waiting in the click buffer for the next flush.",
	}, buffered)
	if reg != nil {
		reg.MustRegister(redirects, cacheLookups, clicks, dropped, created, purged, buffer)
	}
	return &metrics{
		found: redirects.WithLabelValues("found"), expired: redirects.WithLabelValues("expired"),
		notFound: redirects.WithLabelValues("not_found"), limited: redirects.WithLabelValues("limited"),
		localHit: cacheLookups.WithLabelValues("local", "hit"), localMiss: cacheLookups.WithLabelValues("local", "miss"),
		sharedHit: cacheLookups.WithLabelValues("shared", "hit"), sharedMiss: cacheLookups.WithLabelValues("shared", "miss"),
		sharedErr:   cacheLookups.WithLabelValues("shared", "error"),
		humanClicks: clicks.WithLabelValues("human"), botHits: clicks.WithLabelValues("bot"),
		dropFull: dropped.WithLabelValues("buffer_full"), dropStore: dropped.WithLabelValues("store_error"),
		created: created, purged: purged,
	}
}
