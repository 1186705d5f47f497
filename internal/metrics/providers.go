package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/notify/guard"
)

// Providers are the notification provider series: calls by result and
// their latency, calls not made and why, pacing waits and breaker states.
// Build them once per registry with NewProviders and share them between
// every guarded provider. They are safe for concurrent use.
type Providers struct {
	calls   *prometheus.CounterVec
	latency *prometheus.HistogramVec
	refused *prometheus.CounterVec
	waits   *prometheus.HistogramVec
	breaker *prometheus.GaugeVec
}

// NewProviders registers the provider series on reg. If reg is nil, they
// are fed but not registered.
func NewProviders(reg prometheus.Registerer) *Providers {
	m := &Providers{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_notify_provider_calls_total",
			Help: "Provider calls by result: ok, temporary or permanent."}, []string{"provider", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_notify_provider_call_seconds",
			Help: "Provider call latency.", Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10)}, []string{"provider"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_notify_provider_refused_total",
			Help: "Provider calls not made: breaker (open) or pacing (the turn was too far); the delivery waited in the queue."},
			[]string{"provider", "reason"}),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_notify_provider_pacing_wait_seconds",
			Help: "How long calls waited for their provider's rate.", Buckets: prometheus.ExponentialBuckets(0.001, 3, 9)}, []string{"provider"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_notify_provider_breaker_state",
			Help: "Circuit breaker state per provider: 0 closed, 1 open, 2 half-open."}, []string{"provider"}),
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.latency, m.refused, m.waits, m.breaker)
	}
	return m
}

// Hooks returns the hooks that feed the series, for guard.Provider.Metrics.
func (m *Providers) Hooks() guard.Metrics {
	return guard.Metrics{
		Call: func(p, class string, took time.Duration) {
			m.calls.WithLabelValues(p, class).Inc()
			m.latency.WithLabelValues(p).Observe(took.Seconds())
		},
		Refused:    func(p, reason string) { m.refused.WithLabelValues(p, reason).Inc() },
		PacingWait: func(p string, d time.Duration) { m.waits.WithLabelValues(p).Observe(d.Seconds()) },
		Breaker:    m.SetBreaker,
	}
}

// SetBreaker sets provider's sluice_notify_provider_breaker_state to s.
func (m *Providers) SetBreaker(provider string, s guard.BreakerState) {
	m.breaker.WithLabelValues(provider).Set(float64(s))
}
