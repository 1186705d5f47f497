package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/events"
)

// Events are the status events' metrics (docs/operations.md), for
// events.Options.Counted and Disabled.
type Events struct {
	total    *prometheus.CounterVec
	disabled prometheus.Counter
}

// NewEvents registers sluice_events_total and
// sluice_event_subscriptions_disabled_total on reg.
func NewEvents(reg prometheus.Registerer) *Events {
	m := &Events{
		total: counterVec("sluice_events_total",
			"Status events some subscription wants, by type and result: logged (queued to the enabled subscriptions) or lost (never logged).", "type", "result"),
		disabled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_event_subscriptions_disabled_total",
			Help: "Event subscriptions disabled after their run of failures.",
		}),
	}
	reg.MustRegister(m.total, m.disabled)
	for _, t := range events.Types {
		for _, r := range []string{events.ResultLogged, events.ResultLost} {
			m.total.WithLabelValues(t, r)
		}
	}
	return m
}

// Counted counts one event's outcome.
func (m *Events) Counted(eventType, result string) { m.total.WithLabelValues(eventType, result).Inc() }

// Disabled counts one subscription disabled.
func (m *Events) Disabled() { m.disabled.Inc() }
