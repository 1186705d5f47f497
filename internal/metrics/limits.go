package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/limits"
)

// NewLimits registers the rate limiter's series on reg and returns the
// hooks that feed them, to share between limits.Service and
// limits.Failover. sluice_ratelimit_store_up starts at 1.
func NewLimits(reg prometheus.Registerer) *limits.Metrics {
	checks := counterVec("sluice_ratelimit_checks_total",
		"Rate limit checks decided, by policy and result (allowed, refused, blocked). Shadow-mode refusals count as allowed.", "policy", "result")
	wouldRefuse := counterVec("sluice_ratelimit_would_refuse_total",
		"Checks allowed by a soft or shadow policy that its hard form would have refused, by policy and mode.", "policy", "mode")
	fallback := counterVec("sluice_ratelimit_fallback_decisions_total",
		"Checks decided while the shared store was unreachable, by policy and how (open: local limiter, closed: refused).", "policy", "on_store_failure")
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_ratelimit_check_duration_seconds",
		Help:    "Time to decide a check, store round trip included, by policy (\"multi\" for multi-key checks).",
		Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5},
	}, []string{"policy"})
	storeUp := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_ratelimit_store_up",
		Help: "1 while the shared rate limit store (Redis) answers, 0 while checks fall back to local limiters.",
	})
	storeUp.Set(1)
	syncedOver := counterVec("sluice_ratelimit_local_sync_over_total",
		"Checks of sync local policies a node admitted on its own that found no room left in Redis at the next sync (admitted over the limit), by policy.", "policy")
	reg.MustRegister(checks, wouldRefuse, fallback, latency, storeUp, syncedOver)
	return &limits.Metrics{
		Checked: func(policy, result string) { checks.WithLabelValues(policy, result).Inc() },
		WouldRefuse: func(policy string, mode limits.Mode) {
			wouldRefuse.WithLabelValues(policy, string(mode)).Inc()
		},
		FellBack: func(policy string, how limits.Failure) {
			fallback.WithLabelValues(policy, string(how)).Inc()
		},
		Took: func(policy string, d time.Duration) { latency.WithLabelValues(policy).Observe(d.Seconds()) },
		SyncedOver: func(policy string, n int64) {
			syncedOver.WithLabelValues(policy).Add(float64(n))
		},
		StoreUp: func(up bool) {
			if up {
				storeUp.Set(1)
			} else {
				storeUp.Set(0)
			}
		},
	}
}
