package bench

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunTimes reads the figures out of runs' JSON as GET
// /v1/workflow-runs/{id} shows them.
func TestRunTimes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		run      string
		want     RunTimes
		wantPath []string
	}{
		{
			name: "resumed by an event",
			run: `{"id": "run_1", "status": "completed", "created_at": "2026-06-01T12:00:00Z", "updated_at": "2026-06-01T12:00:02Z", "steps": [
				{"index": 0, "name": "wait_go", "kind": "wait_for", "status": "completed", "started_at": "2026-06-01T12:00:00Z",
				 "ended_at": "2026-06-01T12:00:01Z", "until": "2026-06-01T13:00:00Z", "outcome": "event evt_1"},
				{"index": 1, "name": "next", "kind": "send", "status": "completed", "started_at": "2026-06-01T12:00:01.004Z", "ended_at": "2026-06-01T12:00:02Z"}]}`,
			want:     RunTimes{ID: "run_1", Status: "completed", Resume: 4 * time.Millisecond, Resumed: true, Took: 2 * time.Second},
			wantPath: []string{"wait_go", "next"},
		},
		{
			name: "resumed, next step not yet started",
			run: `{"id": "run_2", "status": "running", "created_at": "2026-06-01T12:00:00Z", "updated_at": "2026-06-01T12:00:01Z", "steps": [
				{"index": 0, "kind": "wait_for", "status": "completed", "started_at": "2026-06-01T12:00:00Z",
				 "ended_at": "2026-06-01T12:00:01Z", "outcome": "event evt_2"}]}`,
			want:     RunTimes{ID: "run_2", Status: "running", Took: time.Second},
			wantPath: []string{"wait_for"},
		},
		{
			name: "timed out",
			run: `{"id": "run_3", "status": "completed", "created_at": "2026-06-01T12:00:00Z", "updated_at": "2026-06-01T12:00:05.2Z", "steps": [
				{"index": 0, "name": "wait_go", "kind": "wait_for", "status": "completed", "started_at": "2026-06-01T12:00:00Z",
				 "ended_at": "2026-06-01T12:00:05.2Z", "until": "2026-06-01T12:00:05Z", "outcome": "timed out"}]}`,
			want:     RunTimes{ID: "run_3", Status: "completed", Late: 200 * time.Millisecond, TimedOut: true, Took: 5200 * time.Millisecond},
			wantPath: []string{"wait_go"},
		},
		{
			name: "still waiting",
			run: `{"id": "run_4", "status": "waiting", "created_at": "2026-06-01T12:00:00Z", "updated_at": "2026-06-01T12:00:00Z", "steps": [
				{"index": 0, "name": "pause", "kind": "wait", "status": "completed", "started_at": "2026-06-01T12:00:00Z", "ended_at": "2026-06-01T12:00:01Z", "outcome": "waited"},
				{"index": 1, "name": "wait_go", "kind": "wait_for", "status": "waiting", "started_at": "2026-06-01T12:00:01Z", "until": "2026-06-01T13:00:00Z"}]}`,
			want:     RunTimes{ID: "run_4", Status: "waiting"},
			wantPath: []string{"pause", "wait_go"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rec runRecord
			if err := json.Unmarshal([]byte(tt.run), &rec); err != nil {
				t.Fatal(err)
			}
			got := rec.times()
			if !slices.Equal(got.Path, tt.wantPath) {
				t.Errorf("Path = %v, want %v", got.Path, tt.wantPath)
			}
			got.Path = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("times() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestResumeEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    Options
		w    WorkflowOptions
		want int
	}{
		{"rate for the duration", Options{Duration: 5 * time.Second}, WorkflowOptions{WaitingRuns: 10_000, ResumeRate: 200}, 1000},
		{"requests", Options{Duration: 5 * time.Second, Requests: 300}, WorkflowOptions{WaitingRuns: 10_000, ResumeRate: 200}, 300},
		{"at most one a waiting run", Options{Requests: 300}, WorkflowOptions{WaitingRuns: 120, ResumeRate: 200}, 120},
		{"at least one", Options{Duration: time.Millisecond}, WorkflowOptions{WaitingRuns: 10, ResumeRate: 1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := resumeEvents(tt.o, tt.w); got != tt.want {
				t.Errorf("resumeEvents(%+v, %+v) = %d, want %d", tt.o, tt.w, got, tt.want)
			}
		})
	}
}

// TestPaced: requests go at the rate asked, not faster, and their latency
// leaves out the wait for their turn.
func TestPaced(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	res, err := Paced(t.Context(), "paced", "test", 200, 21, 4, func(context.Context, int64) error {
		calls.Add(1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK != 21 || calls.Load() != 21 {
		t.Errorf("OK %d, calls %d, want 21", res.OK, calls.Load())
	}
	if res.Elapsed < 100*time.Millisecond {
		t.Errorf("21 requests at 200/s took %v, want at least 100ms (the last is due at 100ms)", res.Elapsed)
	}
	if res.Latency.Count() != 21 || res.Latency.Max() >= res.Elapsed/2 {
		t.Errorf("latency count %d, max %v over %v: want 21, each without its wait", res.Latency.Count(), res.Latency.Max(), res.Elapsed)
	}
	if _, err := Paced(t.Context(), "paced", "test", 0, 1, 1, nil); err == nil {
		t.Error("Paced at rate 0 = nil error, want one")
	}
}

// TestWorkflowScenarios: the three are there to be named, and run only
// when named.
func TestWorkflowScenarios(t *testing.T) {
	t.Parallel()
	names := []string{"events", "workflow-resume", "cart"}
	picked, err := PickScenarios(names)
	if err != nil || len(picked) != 3 {
		t.Fatalf("PickScenarios(%v) = %d, %v", names, len(picked), err)
	}
	defaults, _ := PickScenarios(nil)
	for _, s := range defaults {
		if slices.Contains(names, s.Name) {
			t.Errorf("%s runs by default; it should run only when named", s.Name)
		}
	}
	if got := (WorkflowOptions{}).withDefaults(); got != (WorkflowOptions{WaitingRuns: 10_000, ResumeRate: 200, CartUsers: 100_000}) {
		t.Errorf("defaults = %+v", got)
	}
}
