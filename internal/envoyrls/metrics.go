package envoyrls

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus series. Descriptor labels are empty
// unless the rule says detailed_metric, so cardinality stays bounded by the
// configured domains unless an operator asks for more.
type metrics struct {
	requests, overLimit, nearLimit, shadowOver *prometheus.CounterVec
	storeErrors, blocked                       *prometheus.CounterVec
	reloads, reloadFailures                    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	labels := []string{"domain", "descriptor"}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_envoy_requests_total",
			Help: "Envoy rate limit descriptors checked against a configured limit, by domain (and descriptor with detailed_metric).",
		}, labels),
		overLimit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_envoy_over_limit_total",
			Help: "Descriptors answered OVER_LIMIT by their limit (blocked ones are counted in sluice_envoy_blocked_total).",
		}, labels),
		blocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_envoy_blocked_total",
			Help: "Descriptors answered OVER_LIMIT by an emergency block, by domain (\"\" for domains without configuration).",
		}, []string{"domain"}),
		nearLimit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_envoy_near_limit_total",
			Help: "Descriptors allowed with less than the near-limit share of their allowance left.",
		}, labels),
		shadowOver: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_envoy_shadow_over_limit_total",
			Help: "Shadow-mode descriptors that would have been over their limit (answered OK).",
		}, labels),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_envoy_store_errors_total",
			Help: "ShouldRateLimit calls whose counter store failed, answered by the failure policy.",
		}, []string{"domain"}),
		reloads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_envoy_config_reloads_total",
			Help: "Envoy rate limit configurations loaded and put in force.",
		}),
		reloadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_envoy_config_reload_failures_total",
			Help: "Envoy rate limit configuration reloads refused (the previous rules stay in force).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.overLimit, m.nearLimit, m.shadowOver, m.storeErrors, m.blocked, m.reloads, m.reloadFailures)
	}
	return m
}

// series are one label set's counters, resolved once per domain so the
// hot path does not hash label values.
type series struct {
	domain                                     string
	requests, overLimit, nearLimit, shadowOver prometheus.Counter
	blocked                                    prometheus.Counter
}

func (m *metrics) series(domain, descriptor string) *series {
	return &series{
		domain:     domain,
		requests:   m.requests.WithLabelValues(domain, descriptor),
		overLimit:  m.overLimit.WithLabelValues(domain, descriptor),
		nearLimit:  m.nearLimit.WithLabelValues(domain, descriptor),
		shadowOver: m.shadowOver.WithLabelValues(domain, descriptor),
		blocked:    m.blocked.WithLabelValues(domain),
	}
}
