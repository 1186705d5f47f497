package httpapi

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	resolved sync.Map // seriesKey -> series
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_http_requests_total",
			Help: "HTTP requests served, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_http_request_duration_seconds",
			Help:    "HTTP request latency, by route pattern and method.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// seriesKey names the resolved series of one route, method and status.
type seriesKey struct {
	route, method string
	status        int
}

type series struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

func (m *httpMetrics) observe(route, method string, status int, d time.Duration) {
	// Resolving label values hashes them on every call; the set of routes,
	// methods and statuses is small, so resolved series are kept.
	k := seriesKey{route, method, status}
	v, ok := m.resolved.Load(k)
	if !ok {
		v, _ = m.resolved.LoadOrStore(k, series{
			requests: m.requests.WithLabelValues(route, method, strconv.Itoa(status)),
			latency:  m.latency.WithLabelValues(route, method),
		})
	}
	ser := v.(series)
	ser.requests.Inc()
	ser.latency.Observe(d.Seconds())
}
