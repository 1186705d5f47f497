package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/workflow"
)

// Workflows are the workflow engine's series: runs started and ended,
// steps, how late runs resume, and the live runs per workflow and status.
// The workflow label is a workflow's key, bounded by the workflows a node
// may store (workflow.Options.MaxWorkflows), the step label a step's name
// or index (at most workflow.MaxSteps per workflow). Safe for concurrent
// use.
type Workflows struct {
	started *prometheus.CounterVec
	ended   *prometheus.CounterVec
	steps   *prometheus.CounterVec
	late    *prometheus.HistogramVec
	runs    *prometheus.GaugeVec
	shown   map[[2]string]bool // the runs gauge's label pairs set last time
}

// DefaultRunsEvery is how often WatchRuns counts the live runs by default.
const DefaultRunsEvery = 15 * time.Second

// NewWorkflows registers the sluice_workflow_* series on reg. If reg is
// nil, they are fed but not registered.
func NewWorkflows(reg prometheus.Registerer) *Workflows {
	m := &Workflows{
		started: counterVec("sluice_workflow_runs_started_total", "Workflow runs started by an event, by workflow.", "workflow"),
		ended: counterVec("sluice_workflow_runs_ended_total",
			"Workflow runs ended, by workflow and status: completed, canceled (a cancel or the workflow deleted) or failed.", "workflow", "status"),
		steps: counterVec("sluice_workflow_steps_total",
			"Workflow steps ended, by workflow, step (its name, or its index), kind and status (completed or failed).", "workflow", "step", "kind", "status"),
		late: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_workflow_resume_lateness_seconds",
			Help:    "How long after its event (by=event) or its deadline (by=deadline) a waiting run was taken up again.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"by"}),
		runs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_workflow_runs",
			Help: "Live workflow runs (running or waiting) by workflow and status, counted in the store every 15 s."},
			[]string{"workflow", "status"}),
		shown: map[[2]string]bool{},
	}
	if reg != nil {
		reg.MustRegister(m.started, m.ended, m.steps, m.late, m.runs)
	}
	for _, by := range []string{"event", "deadline"} {
		m.late.WithLabelValues(by)
	}
	return m
}

// Hooks returns the hooks that feed the series, for
// workflow.Options.Metrics.
func (m *Workflows) Hooks() workflow.Metrics {
	return workflow.Metrics{
		RunStarted: func(wf string) { m.started.WithLabelValues(wf).Inc() },
		RunEnded:   func(wf string, st workflow.Status) { m.ended.WithLabelValues(wf, string(st)).Inc() },
		StepEnded:  func(wf, step, kind, status string) { m.steps.WithLabelValues(wf, step, kind, status).Inc() },
		Resumed:    func(_ string, by string, late time.Duration) { m.late.WithLabelValues(by).Observe(late.Seconds()) },
	}
}

// WatchRuns sets sluice_workflow_runs from count (the store's CountRuns)
// now and every interval (DefaultRunsEvery if zero) until ctx ends; a
// count that fails leaves the gauge as it was. Run it on one goroutine,
// owned by the node: the counts are the cluster's, the same on every node.
func (m *Workflows) WatchRuns(ctx context.Context, count func(context.Context) (map[string]map[workflow.Status]int64, error), interval time.Duration) {
	if interval <= 0 {
		interval = DefaultRunsEvery
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, interval)
		counts, err := count(cctx)
		cancel()
		if err == nil {
			m.setRuns(counts)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setRuns sets the gauge to counts, dropping the pairs no longer counted
// (a workflow deleted, no run waiting).
func (m *Workflows) setRuns(counts map[string]map[workflow.Status]int64) {
	now := map[[2]string]bool{}
	for wf, byStatus := range counts {
		for st, n := range byStatus {
			m.runs.WithLabelValues(wf, string(st)).Set(float64(n))
			now[[2]string{wf, string(st)}] = true
		}
	}
	for k := range m.shown {
		if !now[k] {
			m.runs.DeleteLabelValues(k[0], k[1])
		}
	}
	m.shown = now
}
