package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/audience"
)

// Audiences are the broadcasts' series: members sent by outcome, and
// broadcasts ended by status. Safe for concurrent use.
type Audiences struct {
	members *prometheus.CounterVec
	ended   *prometheus.CounterVec
}

// NewAudiences registers the sluice_broadcast_* series on reg. If reg is
// nil, they are fed but not registered.
func NewAudiences(reg prometheus.Registerer) *Audiences {
	m := &Audiences{
		members: counterVec("sluice_broadcast_members_total",
			"Broadcast members this node sent, by outcome: accepted (a notification made, or found from a resent batch) or skipped (refused).", "outcome"),
		ended: counterVec("sluice_broadcasts_ended_total", "Broadcasts that ended on this node, by status: done or canceled.", "status"),
	}
	if reg != nil {
		reg.MustRegister(m.members, m.ended)
	}
	for _, o := range []string{"accepted", "skipped"} {
		m.members.WithLabelValues(o)
	}
	for _, st := range []audience.Status{audience.StatusDone, audience.StatusCanceled} {
		m.ended.WithLabelValues(string(st))
	}
	return m
}

// Hooks returns the hooks that feed the series, for
// audience.Options.Metrics.
func (m *Audiences) Hooks() audience.Metrics {
	return audience.Metrics{
		Members: func(accepted, skipped int64) {
			m.members.WithLabelValues("accepted").Add(float64(accepted))
			m.members.WithLabelValues("skipped").Add(float64(skipped))
		},
		Ended: func(st audience.Status) { m.ended.WithLabelValues(string(st)).Inc() },
	}
}
