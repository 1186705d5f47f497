package bench

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
)

// Workflow scenarios drive the workflow engine through the API alone:
// events in (POST /v1/events and /v1/events/batch), runs read back (GET
// /v1/workflow-runs/{id}), each scenario with a workflow of its own (PUT
// /v1/workflows/{key}, so it needs an admin key) whose sends are
// order.shipped by email, which goes to the built-in outbox. Every figure
// of a run is timed on the server's clock (RunTimes).

// WorkflowOptions are the workflow scenarios' sizes (Session.Workflows).
// The zero value takes the defaults.
type WorkflowOptions struct {
	// WaitingRuns is how many runs workflow-resume keeps waiting for an
	// event; 0 means 10,000.
	WaitingRuns int
	// ResumeRate is how many events a second workflow-resume sends to
	// resume them; 0 means 200.
	ResumeRate float64
	// CartUsers is how many users the cart scenario takes through the
	// abandoned cart; 0 means 100,000.
	CartUsers int
}

func (o WorkflowOptions) withDefaults() WorkflowOptions {
	o.WaitingRuns, o.ResumeRate, o.CartUsers = cmp.Or(o.WaitingRuns, 10_000), cmp.Or(o.ResumeRate, 200), cmp.Or(o.CartUsers, 100_000)
	return o
}

// The workflows the scenarios put, and how they start runs.
const (
	// eventBatch is how many events a POST /v1/events/batch carries (the
	// most it takes), and batchSenders how many are in flight at once.
	eventBatch   = 1000
	batchSenders = 4
	// runSample is how many runs' records a scenario reads back for its
	// latencies (all when fewer).
	runSample = 2000

	shippedEmail   = `{"type": "order.shipped", "channels": ["email"]}`
	eventsWorkflow = `{"trigger": {"event": "bench.event"}, "steps": [{"name": "notify", "send": ` + shippedEmail + `}]}`
	// resumeWorkflow (its timeout a parameter) waits for the user's go
	// event with its cart, then sends.
	resumeWorkflow = `{"trigger": {"event": %q}, "steps": [
  {"name": "wait_go", "wait_for": {"event": "bench.resume.go", "match": {"cart_id": "{cart_id}"}, "timeout": %q}},
  {"name": "next", "send": ` + shippedEmail + `}]}`
	// cartWorkflow is the abandoned cart in five steps: a pause, the wait
	// for the order (cartOrderWindow), a branch on whether it came, a
	// reminder for those who did not order, a follow-up for everyone.
	cartWorkflow = `{"trigger": {"event": "bench.cart.abandoned"}, "steps": [
  {"name": "pause", "wait": "1s"},
  {"name": "wait_order", "wait_for": {"event": "bench.order.placed", "match": {"cart_id": "{cart_id}"}, "timeout": "10s"},
   "on_timeout": "check"},
  {"name": "check", "branch": [{"if": {"bench.order.placed": {"exists": true}}, "goto": "follow_up"}]},
  {"name": "remind", "send": ` + shippedEmail + `},
  {"name": "follow_up", "send": ` + shippedEmail + `}]}`
	// cartOrderDelay is how long after its cart's batch was accepted an
	// order is sent: the pause, and time for the run to reach its wait.
	cartOrderDelay = 3 * time.Second
)

func (s *Session) putWorkflow(ctx context.Context, key, def string) error {
	if _, _, err := s.c.PutWorkflow(ctx, key, json.RawMessage(def)); err != nil {
		return fmt.Errorf("put workflow %s (needs an admin key): %w", key, err)
	}
	return nil
}

// events posts single events, each starting a run of bench-events (one
// send), and reports the accept rate; then the time until every run it
// started has ended, and the runs' length from a sample.
func events(ctx context.Context, s *Session) ([]Result, error) {
	if err := s.putWorkflow(ctx, "bench-events", eventsWorkflow); err != nil {
		return nil, err
	}
	run := rand.Text()[:8]
	before, err := s.runsEnded(ctx, "bench-events")
	if err != nil {
		return nil, err
	}
	ids := make(chan string, 1<<16)
	var started []string
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for id := range ids {
			started = append(started, id)
		}
	}()
	start := time.Now()
	accept, err := Run(ctx, "events-accept", targetSluice, s.Options, func(int) Op {
		return func(ctx context.Context, seq int64) error {
			n := strconv.FormatInt(seq, 10)
			a, err := s.c.SendEvent(ctx, client.Event{RequestID: "bench-" + run + "-e" + n, Name: "bench.event",
				UserID: "bench-" + run + "-u" + n, Data: map[string]any{"order": "#" + n, "name": "Ann"}})
			if err != nil {
				return err
			}
			if len(a.RunsStarted) != 1 {
				return fmt.Errorf("event %s started %d runs, want 1", a.EventID, len(a.RunsStarted))
			}
			ids <- a.RunsStarted[0]
			return nil
		}
	})
	close(ids)
	<-collected
	if err != nil {
		return nil, err
	}
	accept.Note = "each event starts a run of one send (order.shipped, email)"
	out := []Result{accept}
	runs, err := s.awaitEnded(ctx, "events-runs", "bench-events", before, int64(len(started)), start)
	out = append(out, runs)
	if err != nil {
		return out, err
	}
	times, err := AwaitRuns(ctx, s.c, sample(started, runSample), s.drainTimeout(), RunTimes.Final)
	for _, t := range times {
		if t.Status == "completed" {
			out[1].Latency.Record(t.Took)
		}
	}
	out[1].Note = fmt.Sprintf("runs ended/s since the first event; latency: a run's creation to its end, %d sampled", out[1].Latency.Count())
	return out, err
}

// ended counts a workflow's runs ended on the server, and those of them
// completed (sluice_workflow_runs_ended_total).
type ended struct{ all, completed int64 }

func (s *Session) runsEnded(ctx context.Context, workflow string) (ended, error) {
	label := `workflow="` + workflow + `"`
	all, err := s.metricSum(ctx, "sluice_workflow_runs_ended_total", label)
	if err != nil {
		return ended{}, err
	}
	completed, err := s.metricSum(ctx, "sluice_workflow_runs_ended_total", label, `status="completed"`)
	return ended{all, completed}, err
}

// awaitEnded waits until the server has ended want more runs of workflow
// than before and returns a row whose Elapsed runs from start to then:
// OK the runs completed, Errors those canceled or failed.
func (s *Session) awaitEnded(ctx context.Context, scenario, workflow string, before ended, want int64, start time.Time) (Result, error) {
	res := Result{Scenario: scenario, Target: targetSluice, Latency: &Histogram{}}
	deadline := time.Now().Add(s.drainTimeout())
	for {
		now, err := s.runsEnded(ctx, workflow)
		if err != nil {
			return res, err
		}
		res.Elapsed = time.Since(start)
		res.OK, res.Errors = now.completed-before.completed, (now.all-before.all)-(now.completed-before.completed)
		if now.all-before.all >= want {
			return res, nil
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d of %d runs ended after --drain-timeout %v", now.all-before.all, want, s.drainTimeout())
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling interval
		}
	}
}

func (s *Session) drainTimeout() time.Duration { return cmp.Or(s.DrainTimeout, 5*time.Minute) }

// metricSum sums the samples of the series name on the server's /metrics
// whose labels hold every one of labels (`workflow="x"`).
func (s *Session) metricSum(ctx context.Context, name string, labels ...string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.Server+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, &StatusError{Status: resp.StatusCode}
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		sum += f
	}
	return int64(sum), sc.Err()
}

// startRuns sends es in batches of eventBatch from batchSenders callers;
// each event must start one run. It returns a row (OK: events accepted,
// latency: a batch's) and the run each event started, in order ("" for
// one in a batch that failed). after, if not nil, is called with the
// range of each batch accepted, from the sender's goroutine.
func (s *Session) startRuns(ctx context.Context, scenario string, es []client.Event, after func(lo, hi int)) (Result, []string, error) {
	c := s.batchClient()
	ids := make([]string, len(es))
	batches := (len(es) + eventBatch - 1) / eventBatch
	res, err := Run(ctx, scenario, targetSluice, Options{Workers: batchSenders, Requests: int64(batches)}, func(int) Op {
		return func(ctx context.Context, seq int64) error {
			lo := int(seq) * eventBatch
			hi := min(lo+eventBatch, len(es))
			results, err := c.SendEvents(ctx, es[lo:hi])
			if err != nil {
				return err
			}
			for i, r := range results {
				if r.Status != "accepted" || len(r.RunsStarted) != 1 {
					return fmt.Errorf("event %d of the batch: %s, %d runs started (%v)", i, r.Status, len(r.RunsStarted), r.Error)
				}
				ids[lo+i] = r.RunsStarted[0]
			}
			if after != nil {
				after(lo, hi)
			}
			return nil
		}
	})
	res.OK = 0
	for _, id := range ids {
		if id != "" {
			res.OK++
		}
	}
	return res, ids, err
}

// batchClient is the session's client with a timeout fit for a batch of
// events: the server takes a batch's events in one at a time, and 1,000
// of them may take longer than a single request's 10 s.
func (s *Session) batchClient() *client.Client {
	c := *s.c
	c.HTTPClient = &http.Client{Transport: s.hc.Transport, CheckRedirect: s.hc.CheckRedirect, Timeout: 2 * time.Minute}
	return &c
}

// awaitNoneRunning waits until workflow has no run running: every run its
// events started has reached its wait (or ended).
func (s *Session) awaitNoneRunning(ctx context.Context, workflow string) error {
	deadline := time.Now().Add(s.drainTimeout())
	for {
		runs, _, err := s.c.ListWorkflowRuns(ctx, client.RunQuery{Workflow: workflow, Status: "running", Limit: 1})
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("runs of %s still running after --drain-timeout %v (%s)", workflow, s.drainTimeout(), runs[0].ID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling interval
		}
	}
}

// quantiles writes a histogram's p50 and p99.
func quantiles(h *Histogram) string {
	return FormatDuration(h.Quantile(0.5)) + " / " + FormatDuration(h.Quantile(0.99))
}
