package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns a node's registry with the runtime collectors
// registered. Every metric name starts with sluice_, the runtime's too
// (sluice_go_*, sluice_process_*, sluice_go_build_info), so one prefix
// selects all of Sluice in a scrape.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	prometheus.WrapRegistererWithPrefix("sluice_", reg).MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)
	return reg
}

// counterVec is a counter vector named name, with help, over labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}
