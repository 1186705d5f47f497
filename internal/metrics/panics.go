package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/panics"
)

// NewPanics registers sluice_panics_total on reg, every surface at zero,
// and returns the function that counts a recovered panic, for
// panics.Reporter.Count.
func NewPanics(reg prometheus.Registerer) func(surface string) {
	c := counterVec("sluice_panics_total",
		"Panics recovered, by surface: each ended one call or item with an internal error, not the node.", "surface")
	reg.MustRegister(c)
	for _, s := range panics.Surfaces {
		c.WithLabelValues(s)
	}
	return func(surface string) { c.WithLabelValues(surface).Inc() }
}
