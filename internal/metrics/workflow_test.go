package metrics

import (
	"context"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/workflow"
)

// gathered returns reg's samples of the series named, as
// `name{label="value",...} value` lines, sorted.
func gathered(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			out = append(out, name+"{"+strings.Join(labels, ",")+"} "+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	slices.Sort(out)
	return out
}

// TestWorkflowHooks: every hook is bound and feeds its series.
func TestWorkflowHooks(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h := NewWorkflows(reg).Hooks()
	v := reflect.ValueOf(h)
	for i := range v.NumField() {
		if v.Field(i).IsNil() {
			t.Errorf("workflow.Metrics.%s is nil", v.Type().Field(i).Name)
		}
	}
	h.RunStarted("cart")
	h.RunEnded("cart", workflow.StatusCompleted)
	h.StepEnded("cart", "remind", "send", "completed")
	h.Resumed("cart", "event", 30*time.Millisecond)
	for name, want := range map[string][]string{
		"sluice_workflow_runs_started_total":      {"sluice_workflow_runs_started_total{workflow=cart} 1"},
		"sluice_workflow_runs_ended_total":        {"sluice_workflow_runs_ended_total{status=completed,workflow=cart} 1"},
		"sluice_workflow_steps_total":             {"sluice_workflow_steps_total{kind=send,status=completed,step=remind,workflow=cart} 1"},
		"sluice_workflow_resume_lateness_seconds": {"sluice_workflow_resume_lateness_seconds{by=deadline} 0", "sluice_workflow_resume_lateness_seconds{by=event} 1"},
	} {
		if got := gathered(t, reg, name); !slices.Equal(got, want) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// TestWorkflowRunsGauge: the gauge follows the counts, and a pair no
// longer counted leaves it.
func TestWorkflowRunsGauge(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := NewWorkflows(reg)
	counts := []map[string]map[workflow.Status]int64{
		{"a": {workflow.StatusWaiting: 3, workflow.StatusRunning: 1}, "b": {workflow.StatusWaiting: 2}},
		{"a": {workflow.StatusWaiting: 4}},
	}
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.WatchRuns(ctx, func(context.Context) (map[string]map[workflow.Status]int64, error) {
			calls++
			if calls == len(counts) {
				cancel()
			}
			return counts[min(calls, len(counts))-1], nil
		}, time.Millisecond)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("WatchRuns did not return after its context ended")
	}
	if got, want := gathered(t, reg, "sluice_workflow_runs"), []string{"sluice_workflow_runs{status=waiting,workflow=a} 4"}; !slices.Equal(got, want) {
		t.Errorf("sluice_workflow_runs = %q, want %q", got, want)
	}
}
