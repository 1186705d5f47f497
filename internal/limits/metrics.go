package limits

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the rate limiter's Prometheus metrics. Build them once per
// registry with NewMetrics and share them between the Service and the
// Failover store. A nil *Metrics records nothing.
type Metrics struct {
	checks      *prometheus.CounterVec
	wouldRefuse *prometheus.CounterVec
	fallback    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	storeUp     prometheus.Gauge
}

// Check outcomes, the values of the result label.
const (
	resultAllowed = "allowed"
	resultRefused = "refused"
	resultBlocked = "blocked"
)

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_ratelimit_checks_total",
			Help: "Rate limit checks decided, by policy and result (allowed, refused, blocked). Shadow-mode refusals count as allowed.",
		}, []string{"policy", "result"}),
		wouldRefuse: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_ratelimit_would_refuse_total",
			Help: "Checks allowed by a soft or shadow policy that its hard form would have refused, by policy and mode.",
		}, []string{"policy", "mode"}),
		fallback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_ratelimit_fallback_decisions_total",
			Help: "Checks decided while the shared store was unreachable, by policy and how (open: local limiter, closed: refused).",
		}, []string{"policy", "on_store_failure"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_ratelimit_check_duration_seconds",
			Help:    "Time to decide a check, store round trip included, by policy (\"multi\" for multi-key checks).",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, .5},
		}, []string{"policy"}),
		storeUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_ratelimit_store_up",
			Help: "1 while the shared rate limit store (Redis) answers, 0 while checks fall back to local limiters.",
		}),
	}
	m.storeUp.Set(1)
	reg.MustRegister(m.checks, m.wouldRefuse, m.fallback, m.latency, m.storeUp)
	return m
}

func (m *Metrics) decided(policy, result string) {
	if m != nil {
		m.checks.WithLabelValues(policy, result).Inc()
	}
}

func (m *Metrics) wouldHaveRefused(policy string, mode Mode) {
	if m != nil {
		m.wouldRefuse.WithLabelValues(policy, string(mode)).Inc()
	}
}

func (m *Metrics) fellBack(policy string, how Failure) {
	if m != nil {
		m.fallback.WithLabelValues(policy, string(how)).Inc()
	}
}

func (m *Metrics) took(policy string, d time.Duration) {
	if m != nil {
		m.latency.WithLabelValues(policy).Observe(d.Seconds())
	}
}

func (m *Metrics) setStoreUp(up bool) {
	if m == nil {
		return
	}
	if up {
		m.storeUp.Set(1)
	} else {
		m.storeUp.Set(0)
	}
}
