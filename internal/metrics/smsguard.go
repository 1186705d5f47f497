package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/notify/guard"
)

// NewSMSGuardRefusals registers sluice_notify_sms_guard_refusals_total on
// reg, every reason at zero, and returns the function that counts a
// refusal, for guard.SMSOptions.Refused.
func NewSMSGuardRefusals(reg prometheus.Registerer) func(reason string) {
	refusals := counterVec("sluice_notify_sms_guard_refusals_total",
		"Notifications refused (422) by the SMS-pumping guard, by reason.", "reason")
	reg.MustRegister(refusals)
	for _, r := range guard.SMSReasons {
		refusals.WithLabelValues(r)
	}
	return func(reason string) { refusals.WithLabelValues(reason).Inc() }
}
