package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/shorten"
)

// NewLinks registers the URL shortener's series on reg and returns the
// hooks that feed them, for shorten.Options.Metrics. Label values are
// resolved here, once, so the redirect path pays an atomic add per event.
// The click buffer gauge is registered when shorten.New hands over the
// buffer (Metrics.ClickBuffer), so the hooks serve one Service. If reg is
// nil, the series are fed but not registered.
func NewLinks(reg prometheus.Registerer) *shorten.Metrics {
	redirects := counterVec("sluice_links_redirects_total",
		"Short link lookups on the redirect path, by result: found, expired, not_found, limited (unknown-code lookups over the per-client limit).", "result")
	cacheLookups := counterVec("sluice_links_cache_lookups_total",
		"Redirect-path cache lookups, by level (local, shared, stale: an entry past links.cache_ttl answered because the store failed) and result (hit, miss, error).", "level", "result")
	clicks := counterVec("sluice_links_hits_recorded_total",
		"Link hits written to the store, by kind: human (counted as clicks) or bot.", "kind")
	dropped := counterVec("sluice_links_clicks_dropped_total",
		"Link hits not recorded, by reason: buffer_full (the redirect did not wait) or store_error.", "reason")
	created := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_links_created_total", Help: "Short links created."})
	purged := prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_links_purged_total", Help: "Expired short links purged."})
	clicksPurged := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_links_clicks_purged_total",
		Help: "Raw link clicks deleted for being older than links.click_retention (rollups are kept).",
	})
	if reg != nil {
		reg.MustRegister(redirects, cacheLookups, clicks, dropped, created, purged, clicksPurged)
	}
	human, bot := clicks.WithLabelValues("human"), clicks.WithLabelValues("bot")
	dropStore := dropped.WithLabelValues("store_error")
	m := &shorten.Metrics{
		Found:       redirects.WithLabelValues("found").Inc,
		Expired:     redirects.WithLabelValues("expired").Inc,
		NotFound:    redirects.WithLabelValues("not_found").Inc,
		Limited:     redirects.WithLabelValues("limited").Inc,
		LocalHit:    cacheLookups.WithLabelValues("local", "hit").Inc,
		LocalMiss:   cacheLookups.WithLabelValues("local", "miss").Inc,
		SharedHit:   cacheLookups.WithLabelValues("shared", "hit").Inc,
		SharedMiss:  cacheLookups.WithLabelValues("shared", "miss").Inc,
		SharedError: cacheLookups.WithLabelValues("shared", "error").Inc,
		StaleHit:    cacheLookups.WithLabelValues("stale", "hit").Inc,
		Recorded: func(humans, bots int) {
			bot.Add(float64(bots))
			human.Add(float64(humans))
		},
		BufferFull:   dropped.WithLabelValues("buffer_full").Inc,
		StoreError:   func(n int) { dropStore.Add(float64(n)) },
		Created:      created.Inc,
		Purged:       func(n int) { purged.Add(float64(n)) },
		ClicksPurged: func(n int) { clicksPurged.Add(float64(n)) },
		ClickBuffer: func(pending func() int) {
			if reg != nil {
				reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
					Name: "sluice_links_click_buffer",
					Help: "Link hits waiting in the click buffer for the next flush.",
				}, func() float64 { return float64(pending()) }))
			}
		},
	}
	bindLinkAnalytics(reg, m)
	return m
}
