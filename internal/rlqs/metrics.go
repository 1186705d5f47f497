package rlqs

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the sluice_rlqs_* series. Labels are bounded by the
// configuration: domain is "" for domains without rules (Envoy names
// them), rule is the rule's name ("" for buckets no rule matches).
type metrics struct {
	streams                   prometheus.Gauge
	buckets, clients, share   *prometheus.GaugeVec
	reported, shadowDenied    *prometheus.CounterVec
	blocked, abandoned        *prometheus.CounterVec
	demandErrors, assignments prometheus.Counter
	refused                   prometheus.Counter
	refusedBy                 *prometheus.CounterVec

	// sizes reports the tables' sizes when the gauges are collected.
	sizes func() (clients, buckets, ids int)

	mu   sync.Mutex
	subs map[ruleLabels]*ruleSubs
}

type ruleLabels struct{ domain, rule string }

// ruleSubs counts one rule's subscriptions on this node: each bucket and
// each client (stream) once, however many of the other it has.
type ruleSubs struct {
	buckets map[string]int
	clients map[string]int
}

func newMetrics(reg prometheus.Registerer, sizes func() (clients, buckets, ids int)) *metrics {
	dr := []string{"domain", "rule"}
	m := &metrics{
		subs:  map[ruleLabels]*ruleSubs{},
		sizes: sizes,
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_rlqs_streams",
			Help: "Envoy rate limit quota streams open on this node.",
		}),
		buckets: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_rlqs_buckets",
			Help: "Rate limit quota buckets some Envoy on this node reports, by domain and rule (\"\" when no rule matches).",
		}, dr),
		clients: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_rlqs_clients",
			Help: "Envoy streams on this node reporting at least one bucket of the rule.",
		}, dr),
		share: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_rlqs_assigned_share",
			Help: "Requests per rule period assigned to this node's Envoys, summed over the rule's buckets.",
		}, dr),
		reported: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rlqs_reported_requests_total",
			Help: "Requests Envoys reported, by domain, rule and result (allowed or denied by the Envoy).",
		}, []string{"domain", "rule", "result"}),
		shadowDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rlqs_shadow_would_deny_total",
			Help: "Requests of shadow-mode rules past the client's share (allowed, as shadow mode does).",
		}, dr),
		blocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rlqs_blocked_total",
			Help: "DENY_ALL assignments sent because an emergency block covers the bucket.",
		}, []string{"domain"}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rlqs_abandoned_total",
			Help: "Abandon actions sent because the bucket's rule was removed.",
		}, []string{"domain"}),
		assignments: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_rlqs_assignments_total",
			Help: "Bucket actions sent to Envoys (quota assignments and abandons).",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_rlqs_streams_refused_total",
			Help: "Rate limit quota streams refused because the node held rlqs.max_streams already.",
		}),
		refusedBy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_rlqs_refused_total",
			Help: "Rate limit quota streams ended by a bound, by reason: streams, streams_per_client, buckets, buckets_per_client, buckets_per_stream (RESOURCE_EXHAUSTED past the cap), reports_per_second (RESOURCE_EXHAUSTED), first_report_timeout (DEADLINE_EXCEEDED), invalid_report (INVALID_ARGUMENT).",
		}, []string{"reason"}),
		demandErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_rlqs_demand_errors_total",
			Help: "Reports whose shared demand table (Redis) failed; their shares came from this node's clients alone, of limit / nodes.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.streams, m.buckets, m.clients, m.share, m.reported, m.shadowDenied,
			m.blocked, m.abandoned, m.assignments, m.demandErrors, m.refused, m.refusedBy)
		size := func(name, help string, pick func(clients, buckets, ids int) int) prometheus.Collector {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
				return float64(pick(m.sizes()))
			})
		}
		reg.MustRegister(
			size("sluice_rlqs_tracked_clients", "Clients (peer IP addresses, or API keys with --grpc-require-key) holding rate limit quota streams on this node.",
				func(c, _, _ int) int { return c }),
			size("sluice_rlqs_tracked_buckets", "Buckets the rate limit quota streams of this node track, one per stream and bucket (bounded by rlqs.max_buckets).",
				func(_, b, _ int) int { return b }),
			size("sluice_rlqs_bucket_ids", "Distinct bucket ids this node holds (each once, however many streams report it).",
				func(_, _, i int) int { return i }))
	}
	for _, r := range []string{reasonStreams, reasonStreamsPerClient, reasonBuckets, reasonBucketsPerClient,
		reasonBucketsPerStream, reasonReportRate, reasonFirstReport, reasonInvalid} {
		m.refusedBy.WithLabelValues(r) // every reason shows, at 0
	}
	return m
}

// refusedFor counts a stream ended by a bound.
func (m *metrics) refusedFor(reason string) { m.refusedBy.WithLabelValues(reason).Inc() }

// subscribe counts client's subscription to bucket under l.
func (m *metrics) subscribe(l ruleLabels, bucket, client string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subs[l]
	if s == nil {
		s = &ruleSubs{buckets: map[string]int{}, clients: map[string]int{}}
		m.subs[l] = s
	}
	s.buckets[bucket]++
	s.clients[client]++
	m.buckets.WithLabelValues(l.domain, l.rule).Set(float64(len(s.buckets)))
	m.clients.WithLabelValues(l.domain, l.rule).Set(float64(len(s.clients)))
}

// unsubscribe undoes subscribe, and removes share from the assigned total.
func (m *metrics) unsubscribe(l ruleLabels, bucket, client string, share float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.subs[l]
	if s == nil {
		return
	}
	dec(s.buckets, bucket)
	dec(s.clients, client)
	m.buckets.WithLabelValues(l.domain, l.rule).Set(float64(len(s.buckets)))
	m.clients.WithLabelValues(l.domain, l.rule).Set(float64(len(s.clients)))
	if share != 0 {
		m.share.WithLabelValues(l.domain, l.rule).Sub(share)
	}
}

func dec(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}
