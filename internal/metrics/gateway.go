package metrics

import "github.com/prometheus/client_golang/prometheus"

// NewGatewayUsageUnreadable registers sluice_gateway_usage_unreadable_total
// on reg and returns the function that counts one, for
// gateway.Options.UsageUnreadable.
func NewGatewayUsageUnreadable(reg prometheus.Registerer) func(route, reason string) {
	unreadable := counterVec("sluice_gateway_usage_unreadable_total",
		"Responses of gateway routes with cost_from_response whose cost could not be read (charged the estimate), by route and reason.", "route", "reason")
	reg.MustRegister(unreadable)
	return func(route, reason string) { unreadable.WithLabelValues(route, reason).Inc() }
}
