package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/client"
)

// resume keeps WaitingRuns runs of bench-resume waiting for their go event
// (each its own user, created through POST /v1/events/batch), then sends
// go events to them at ResumeRate and reports how long after its event
// each resumed run started its next step. A hundredth as many runs of
// bench-deadline (100 to 1,000), whose wait_for times out in the middle of
// the events, give how late a deadline ends its wait.
func resume(ctx context.Context, s *Session) ([]Result, error) {
	o := s.Workflows.withDefaults()
	n := resumeEvents(s.Options, o)
	phase := time.Duration(float64(n) / o.ResumeRate * float64(time.Second))
	timeout := max(time.Second, (phase / 2).Round(100*time.Millisecond))
	if err := s.putWorkflow(ctx, "bench-resume", fmt.Sprintf(resumeWorkflow, "bench.resume.start", "1h")); err != nil {
		return nil, err
	}
	if err := s.putWorkflow(ctx, "bench-deadline", fmt.Sprintf(resumeWorkflow, "bench.deadline.start", timeout.String())); err != nil {
		return nil, err
	}
	run := rand.Text()[:8]
	user := func(kind string, i int) string { return "bench-" + run + "-" + kind + strconv.Itoa(i) }
	starts := make([]client.Event, o.WaitingRuns)
	for i := range starts {
		starts[i] = client.Event{RequestID: user("w", i) + "-start", Name: "bench.resume.start", UserID: user("w", i),
			Data: map[string]any{"cart_id": "c" + strconv.Itoa(i)}}
	}
	began := time.Now()
	fill, _, err := s.startRuns(ctx, "resume-fill", starts, nil)
	if err == nil {
		err = s.awaitNoneRunning(ctx, "bench-resume")
	}
	fill.Note = fmt.Sprintf("runs started in batches of %d, all waiting %s after the first batch", eventBatch, FormatDuration(time.Since(began)))
	out := []Result{fill}
	if err != nil {
		return out, err
	}

	late := make([]client.Event, min(max(o.WaitingRuns/100, 100), 1000))
	for i := range late {
		late[i] = client.Event{RequestID: user("d", i) + "-start", Name: "bench.deadline.start", UserID: user("d", i),
			Data: map[string]any{"cart_id": "d" + strconv.Itoa(i)}}
	}
	_, lateIDs, err := s.startRuns(ctx, "resume-deadline", late, nil)
	if err != nil {
		return out, fmt.Errorf("start the runs with a deadline: %w", err)
	}

	ids := make([]string, n)
	sent, err := Paced(ctx, "resume-event", targetSluice, o.ResumeRate, int64(n), s.Options.Workers, func(ctx context.Context, seq int64) error {
		i := int(seq * int64(o.WaitingRuns) / int64(n)) // spread over every waiting run
		a, err := s.c.SendEvent(ctx, client.Event{RequestID: user("w", i) + "-go", Name: "bench.resume.go", UserID: user("w", i),
			Data: map[string]any{"cart_id": "c" + strconv.Itoa(i)}})
		if err != nil {
			return err
		}
		if len(a.RunsResumed) != 1 {
			return fmt.Errorf("event %s resumed %d runs, want 1", a.EventID, len(a.RunsResumed))
		}
		ids[seq] = a.RunsResumed[0]
		return nil
	})
	sent.Note = fmt.Sprintf("POST /v1/events at %g/s offered, each resuming one of %d waiting runs", o.ResumeRate, o.WaitingRuns)
	out = append(out, sent)
	if err != nil {
		return out, err
	}
	lat, err := s.resumeLatency(ctx, nonEmpty(ids))
	out = append(out, lat)
	if err != nil {
		return out, err
	}
	dl, err := s.deadlineLateness(ctx, lateIDs, timeout)
	return append(out, dl), err
}

// resumeEvents is how many go events resume sends: --requests, or the
// rate for --duration, at most one per waiting run.
func resumeEvents(o Options, w WorkflowOptions) int {
	n := o.Requests
	if n <= 0 {
		n = int64(w.ResumeRate * o.Duration.Seconds())
	}
	return int(max(1, min(n, int64(w.WaitingRuns))))
}

// resumeLatency reads a sample of the resumed runs until each has started
// its next step, and returns the row of their resume latency.
func (s *Session) resumeLatency(ctx context.Context, resumed []string) (Result, error) {
	res := Result{Scenario: "resume-latency", Target: targetSluice, Latency: &Histogram{}}
	picked := sample(resumed, runSample)
	times, err := AwaitRuns(ctx, s.c, picked, s.drainTimeout(), func(t RunTimes) bool { return t.Resumed || t.Final() })
	for _, t := range times {
		if t.Resumed {
			res.OK++
			res.Latency.Record(t.Resume)
		} else if t.ID != "" {
			res.Errors++
			res.FirstError = cmp.Or(res.FirstError, fmt.Sprintf("run %s is %s without its next step", t.ID, t.Status))
		}
	}
	res.Note = fmt.Sprintf("the event's created time (its wait_for's end) to the next step's start, server clock; %d sampled of %d", len(picked), len(resumed))
	return res, err
}

// deadlineLateness waits until every run of ids (whose wait_for times out
// after timeout) has ended, and returns the row of how late each wait
// ended.
func (s *Session) deadlineLateness(ctx context.Context, ids []string, timeout time.Duration) (Result, error) {
	res := Result{Scenario: "resume-deadline", Target: targetSluice, Latency: &Histogram{}}
	times, err := AwaitRuns(ctx, s.c, ids, timeout+s.drainTimeout(), RunTimes.Final)
	for _, t := range times {
		if t.TimedOut {
			res.OK++
			res.Latency.Record(t.Late)
		} else if t.ID != "" {
			res.Errors++
			res.FirstError = cmp.Or(res.FirstError, fmt.Sprintf("run %s ended %s without its wait timing out", t.ID, t.Status))
		}
	}
	res.Note = fmt.Sprintf("runs whose wait_for (timeout %s) ends while the events go: its end minus its until", timeout)
	return res, err
}

func nonEmpty(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}
