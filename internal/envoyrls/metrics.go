package envoyrls

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's Prometheus series. Descriptor labels are empty
// unless the rule says detailed_metric, and then bounded: the first
// detailedMax distinct descriptors of a domain get their own label value,
// later ones share "other". Descriptor values are client input (user ids,
// addresses), so without the bound one client sending fresh values would
// grow /metrics, and the registry's memory, without end.
type metrics struct {
	requests, overLimit, nearLimit, shadowOver *prometheus.CounterVec
	storeErrors, blocked                       *prometheus.CounterVec
	reloads, reloadFailures                    prometheus.Counter

	detailedMax int
	mu          sync.Mutex
	detailed    map[string]map[string]*series // domain -> descriptor -> series
	other       map[string]*series            // domain -> its "other" series
}

// detailedOther is the descriptor label of values past the bound.
const detailedOther = "other"

func newMetrics(reg prometheus.Registerer, detailedMax int) *metrics {
	labels := []string{"domain", "descriptor"}
	m := &metrics{
		detailedMax: detailedMax,
		detailed:    make(map[string]map[string]*series),
		other:       make(map[string]*series),
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

// detailedSeries returns the series of descriptor (its path, see
// descriptorPath) in domain for a detailed_metric rule: its own while
// fewer than detailedMax descriptors of the domain have one, else the
// domain's "other".
func (m *metrics) detailedSeries(domain, descriptor string) *series {
	m.mu.Lock()
	defer m.mu.Unlock()
	known := m.detailed[domain]
	if ser, ok := known[descriptor]; ok {
		return ser
	}
	if len(known) < m.detailedMax {
		if known == nil {
			known = make(map[string]*series)
			m.detailed[domain] = known
		}
		ser := m.series(domain, descriptor)
		known[descriptor] = ser
		return ser
	}
	ser, ok := m.other[domain]
	if !ok {
		ser = m.series(domain, detailedOther)
		m.other[domain] = ser
	}
	return ser
}
