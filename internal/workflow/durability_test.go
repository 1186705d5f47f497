package workflow_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/workflow"
)

// crashing is the store with a node that dies after its step and before
// the step's write: UpdateRun fails while die says so.
type crashing struct {
	*store.DB
	mu  sync.Mutex
	die func(r workflow.Run) bool
}

func (c *crashing) UpdateRun(ctx context.Context, r workflow.Run, seq int64) (workflow.Run, error) {
	c.mu.Lock()
	die := c.die != nil && c.die(r)
	if die {
		c.die = nil // once
	}
	c.mu.Unlock()
	if die {
		return workflow.Run{}, apperr.New(apperr.Unavailable, "the node died")
	}
	return c.DB.UpdateRun(ctx, r, seq)
}

// TestCrashBetweenSendAndWrite: the node dies after the send and before
// its write; the run is due again when the claim ends, the step runs
// again with the same request_id, and the notification exists once.
func TestCrashBetweenSendAndWrite(t *testing.T) {
	t.Parallel()
	var c *crashing
	b := setup(t, func(o *workflow.Options) {
		c = &crashing{DB: o.Store.(*store.DB), die: func(r workflow.Run) bool {
			n := len(r.Steps)
			return n > 0 && r.Steps[n-1].Kind == "send" && r.Steps[n-1].Status == "completed"
		}}
		o.Store = c
	})
	b.put(t, "w", `{"trigger":{"event":"e"},"steps":[{"send":"flash_sale"},{"wait":"1h"}]}`)
	id := one(t, b.ingest(t, "e", "u1", `{"discount":"20%"}`).RunsStarted)
	b.due(t)
	if got := b.sender.requests(); !slices.Equal(got, []string{"wf:" + id + ":0"}) {
		t.Fatalf("sent %q", got)
	}
	b.at(t, id, workflow.StatusRunning, "", "") // no step recorded: the write was lost
	b.clock.Advance(29 * time.Second)
	if n := b.due(t); n != 0 {
		t.Fatalf("%d runs advanced while the dead node's claim held", n)
	}
	b.clock.Advance(2 * time.Second)
	b.due(t)
	v := b.at(t, id, workflow.StatusWaiting, "wait", "waiting")
	if got := b.sender.requests(); !slices.Equal(got, []string{"wf:" + id + ":0", "wf:" + id + ":0"}) {
		t.Fatalf("sent %q, want the same request twice", got)
	}
	n := b.notification(t, "wf:"+id+":0")
	if b.notifications(t, "u1") != 1 || v.Steps[0].NotificationID != n.ID {
		t.Errorf("%d notifications, step's %q, saved %q; want one, the same", b.notifications(t, "u1"), v.Steps[0].NotificationID, n.ID)
	}
}

// TestStepGuard: a run looping through a wait fails after the guard's
// number of steps (MaxRunSteps; 100 here, for speed: the same check).
func TestStepGuard(t *testing.T) {
	t.Parallel()
	const guard = 100
	b := setup(t, nil)
	b.svc.SetMaxRunSteps(guard)
	steps := []string{`{"name":"w","wait":"1s"}`}
	for range 8 {
		steps = append(steps, `{"branch":[{"if":{"x":{"exists":true}},"goto":"w"}]}`)
	}
	steps = append(steps, `{"branch":[{"if":{"x":{"exists":true}},"goto":"w"}],"else":"w"}`)
	b.put(t, "loop", `{"trigger":{"event":"e"},"steps":[`+strings.Join(steps, ",")+`]}`)
	id := one(t, b.ingest(t, "e", "u1", `{}`).RunsStarted)
	for i := 0; i < guard/10+1; i++ {
		b.due(t)
		b.clock.Advance(time.Second)
	}
	v := b.at(t, id, workflow.StatusFailed, "wait", "failed")
	if len(v.Steps) != guard+1 || !strings.Contains(v.Steps[len(v.Steps)-1].Outcome, "too many steps") {
		t.Errorf("%d steps, last %+v", len(v.Steps), v.Steps[len(v.Steps)-1])
	}
	if b.metrics.count("ended loop failed") != 1 {
		t.Errorf("metrics %q", b.metrics.lines[len(b.metrics.lines)-3:])
	}
}

// TestConcurrentAdvancers: two nodes (Services on one store) advance the
// same claimed runs at once, as when a slow node's claim ran out: each
// step is recorded once and each notification exists once.
func TestConcurrentAdvancers(t *testing.T) {
	t.Parallel()
	engines(t, nil, concurrentAdvancers)
}

func concurrentAdvancers(t *testing.T, b *bundle) {
	other := workflow.New(b.opts)
	b.put(t, "w", `{"trigger":{"event":"e"},"steps":[{"send":"flash_sale"},{"send":"price_drop"},{"send":"back_in_stock"},{"wait":"1h"},{"send":"flash_sale"}]}`)
	const runs = 10
	var ids []string
	for i := range runs {
		ids = append(ids, one(t, b.ingest(t, "e", fmt.Sprintf("u%d", i), `{}`).RunsStarted))
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		r, ok, err := b.db.ClaimRun(t.Context(), id, b.clock.Now(), time.Minute)
		if err != nil || !ok {
			t.Fatalf("ClaimRun(%s) = %v, %v", id, ok, err)
		}
		for _, s := range []*workflow.Service{b.svc, other} {
			wg.Go(func() { s.Advance(context.Background(), r) })
		}
	}
	wg.Wait()
	for _, id := range ids {
		v := b.at(t, id, workflow.StatusWaiting, "wait", "waiting")
		if got := indexes(v); !slices.Equal(got, []int{0, 1, 2, 3}) {
			t.Errorf("run %s steps %v, want each once", id, got)
		}
	}
	b.clock.Advance(time.Hour)
	for _, s := range []*workflow.Service{b.svc, other} {
		wg.Go(func() { _, _ = s.RunDue(context.Background()) })
	}
	wg.Wait()
	for i, id := range ids {
		v := b.at(t, id, workflow.StatusCompleted, "send", "completed")
		if got := indexes(v); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
			t.Errorf("run %s steps %v, want each once", id, got)
		}
		if n := b.notifications(t, fmt.Sprintf("u%d", i)); n != 4 {
			t.Errorf("user u%d has %d notifications, want 4", i, n)
		}
	}
}

func indexes(v workflow.RunView) []int {
	var out []int
	for _, s := range v.Steps {
		out = append(out, s.Index)
	}
	return out
}

// TestSendRetries: a send failing transiently is tried again after 5 s,
// then 10 s; one refused for good fails the run.
func TestSendRetries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.put(t, "w", `{"trigger":{"event":"e"},"steps":[{"send":"flash_sale"}]}`)
	b.sender.script(apperr.New(apperr.Unavailable, "store down"), apperr.New(apperr.Unavailable, "store down"))
	id := one(t, b.ingest(t, "e", "u1", `{}`).RunsStarted)
	b.due(t)
	v := b.at(t, id, workflow.StatusRunning, "send", "running")
	if s := v.Steps[0]; s.Attempts != 1 || !strings.Contains(s.Outcome, "retrying") {
		t.Fatalf("step %+v", s)
	}
	b.clock.Advance(4 * time.Second)
	if b.due(t) != 0 {
		t.Fatal("retried before 5 s")
	}
	b.clock.Advance(time.Second)
	b.due(t)
	b.clock.Advance(9 * time.Second)
	if b.due(t) != 0 {
		t.Fatal("retried again before 10 s")
	}
	b.clock.Advance(time.Second)
	b.due(t)
	v = b.at(t, id, workflow.StatusCompleted, "send", "completed")
	if len(v.Steps) != 1 || v.Steps[0].Attempts != 3 || v.Steps[0].NotificationID == "" || !v.Steps[0].StartedAt.Equal(t0) {
		t.Errorf("steps %+v, want one record of 3 attempts", v.Steps)
	}
	b.sender.script(apperr.New(apperr.Unprocessable, "data too big"))
	id = one(t, b.ingest(t, "e", "u2", `{}`).RunsStarted)
	b.due(t)
	v = b.at(t, id, workflow.StatusFailed, "send", "failed")
	if o := v.Steps[0].Outcome; o != "send failed: data too big" {
		t.Errorf("outcome %q", o)
	}
	if b.metrics.count("ended w failed") != 1 || b.metrics.count("step w 0 send failed") != 1 {
		t.Errorf("metrics %q", b.metrics.lines)
	}
}

// TestCancel: by user and by run; a canceled run is neither resumed by
// its event nor advanced at its deadline; an advance in flight loses.
func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.put(t, "cart", abandonedCart)
	b.put(t, "w", `{"trigger":{"event":"e"},"steps":[{"wait":"1h"},{"send":"flash_sale"}]}`)
	byUser := one(t, b.ingest(t, "cart.abandoned", "u1", `{"cart_id":"c1"}`).RunsStarted)
	byRun := one(t, b.ingest(t, "cart.abandoned", "u2", `{"cart_id":"c2"}`).RunsStarted)
	b.due(t)
	b.clock.Advance(time.Hour)
	b.due(t)
	inFlight := one(t, b.ingest(t, "e", "u3", `{}`).RunsStarted)
	ids, err := b.svc.Cancel(t.Context(), "cart", "u1", "")
	if err != nil || !slices.Equal(ids, []string{byUser}) {
		t.Fatalf("Cancel by user = %v, %v", ids, err)
	}
	if ids, err := b.svc.Cancel(t.Context(), "cart", "", byRun); err != nil || !slices.Equal(ids, []string{byRun}) {
		t.Fatalf("Cancel by run = %v, %v", ids, err)
	}
	if ids, err := b.svc.Cancel(t.Context(), "cart", "", byRun); err != nil || len(ids) != 0 {
		t.Errorf("Cancel again = %v, %v, want none", ids, err)
	}
	for _, bad := range [][2]string{{"cart", "run_nope"}, {"w", byRun}} {
		if _, err := b.svc.Cancel(t.Context(), bad[0], "", bad[1]); !apperr.Is(err, apperr.NotFound) {
			t.Errorf("Cancel(%s, %s) = %v, want NotFound", bad[0], bad[1], err)
		}
	}
	if _, err := b.svc.Cancel(t.Context(), "cart", "", ""); !apperr.Is(err, apperr.Unprocessable) {
		t.Errorf("Cancel of nobody = %v", err)
	}
	v := b.at(t, byUser, workflow.StatusCanceled, "wait_for", "canceled")
	if v.WaitingFor != nil {
		t.Errorf("a canceled run shows waiting_for %+v", v.WaitingFor)
	}
	if a := b.ingest(t, "order.placed", "u1", `{"cart_id":"c1"}`); len(a.RunsResumed) != 0 {
		t.Errorf("a canceled run was resumed: %+v", a)
	}
	r, ok, err := b.db.ClaimRun(t.Context(), inFlight, b.clock.Now(), time.Minute)
	if err != nil || !ok {
		t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	if _, err := b.svc.Cancel(t.Context(), "w", "u3", ""); err != nil {
		t.Fatal(err)
	}
	b.svc.Advance(t.Context(), r)
	b.clock.Advance(24 * time.Hour)
	b.due(t)
	for _, id := range []string{byUser, byRun, inFlight} {
		if v := b.run(t, id); v.Status != workflow.StatusCanceled {
			t.Errorf("run %s is %s, want canceled", id, v.Status)
		}
	}
	if len(b.sender.requests()) != 0 {
		t.Errorf("canceled runs sent %q", b.sender.requests())
	}
	if b.metrics.count("ended cart canceled") != 2 || b.metrics.count("ended w canceled") != 1 {
		t.Errorf("metrics %q", b.metrics.lines)
	}
}

// TestDeleteWorkflow: deleting cancels the live runs, events start no
// more, and the key put again continues its versions.
func TestDeleteWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const def = `{"trigger":{"event":"e"},"steps":[{"wait":"1h"},{"send":"flash_sale"}]}`
	b.put(t, "w", def)
	live := one(t, b.ingest(t, "e", "u1", `{}`).RunsStarted)
	b.due(t)
	n, err := b.svc.DeleteWorkflow(t.Context(), "w")
	if err != nil || n != 1 {
		t.Fatalf("DeleteWorkflow = %d, %v; want 1 canceled", n, err)
	}
	b.at(t, live, workflow.StatusCanceled, "wait", "canceled")
	if _, err := b.svc.Workflow(t.Context(), "w"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("Workflow after delete: %v", err)
	}
	if a := b.ingest(t, "e", "u2", `{}`); len(a.RunsStarted) != 0 {
		t.Errorf("a deleted workflow started %v", a.RunsStarted)
	}
	w, created, err := b.svc.PutWorkflow(t.Context(), "w", []byte(def))
	if err != nil || !created || w.Version != 2 {
		t.Errorf("put again: version %d created %v %v; want 2, created", w.Version, created, err)
	}
	b.clock.Advance(time.Hour)
	b.due(t)
	if len(b.sender.requests()) != 0 || b.metrics.count("ended w canceled") != 1 {
		t.Errorf("sent %q; metrics %q", b.sender.requests(), b.metrics.lines)
	}
}

// TestVersionPinning: a run keeps the version it started on; a change
// applies to new runs only; the same definition again is no new version.
func TestVersionPinning(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	v1 := b.put(t, "w", `{"trigger":{"event":"e"},"steps":[{"wait":"1h"},{"send":"flash_sale"}]}`)
	old := one(t, b.ingest(t, "e", "u1", `{}`).RunsStarted)
	v2 := b.put(t, "w", `{"trigger":{"event":"e"},"steps":[{"wait":"1h"},{"send":"price_drop"}]}`)
	same, created, err := b.svc.PutWorkflow(t.Context(), "w", []byte(`{"steps":[{"wait":"60m"},{"send":"price_drop"}],"trigger":{"event":"e"}}`))
	if v1.Version != 1 || v2.Version != 2 || err != nil || created || same.Version != 2 {
		t.Fatalf("versions %d, %d, again %d (created %v, %v)", v1.Version, v2.Version, same.Version, created, err)
	}
	young := one(t, b.ingest(t, "e", "u2", `{}`).RunsStarted)
	b.due(t)
	b.clock.Advance(time.Hour)
	b.due(t)
	if n := b.notification(t, "wf:"+old+":1"); n.Type != "flash_sale" {
		t.Errorf("the old run sent %s, want flash_sale (version 1)", n.Type)
	}
	if n := b.notification(t, "wf:"+young+":1"); n.Type != "price_drop" {
		t.Errorf("the new run sent %s, want price_drop (version 2)", n.Type)
	}
	if v := b.run(t, old); v.Version != 1 {
		t.Errorf("old run version %d", v.Version)
	}
}

// TestSchedulerResumesAtOnce: RunScheduler advances the runs an event
// started or resumed at once, not at its next tick (an hour away here).
func TestSchedulerResumesAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *workflow.Options) { o.Now, o.Tick = nil, time.Hour })
	b.put(t, "w", `{"trigger":{"event":"start"},"steps":[{"wait_for":{"event":"go"}},{"send":"flash_sale"}]}`)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.svc.RunScheduler(ctx) }()
	id := one(t, b.ingest(t, "start", "u1", `{}`).RunsStarted)
	status := func(want workflow.Status) func() error {
		return func() error {
			v, err := b.svc.Run(t.Context(), id)
			if err != nil {
				return err
			}
			return enginetest.State(v.Status == want, "status %s, want %s", v.Status, want)
		}
	}
	enginetest.EventuallyNil(t, 20*time.Second, "the started run waiting", status(workflow.StatusWaiting))
	one(t, b.ingest(t, "go", "u1", `{}`).RunsResumed)
	took := enginetest.EventuallyNil(t, 20*time.Second, "the resumed run completed", status(workflow.StatusCompleted))
	t.Logf("resumed and completed %v after its event", took)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunScheduler = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("RunScheduler did not return after its context ended")
	}
}

// TestSchedulerClaimsDue: RunScheduler's tick takes a run whose wait
// ended.
func TestSchedulerClaimsDue(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *workflow.Options) { o.Tick = 10 * time.Millisecond })
	b.put(t, "w", `{"trigger":{"event":"e"},"steps":[{"wait":"1h"},{"send":"flash_sale"}]}`)
	id := one(t, b.ingest(t, "e", "u1", `{}`).RunsStarted)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = b.svc.RunScheduler(ctx) }()
	check := func(want workflow.Status) func() error {
		return func() error {
			v, err := b.svc.Run(t.Context(), id)
			if err != nil {
				return err
			}
			return enginetest.State(v.Status == want, "status %s", v.Status)
		}
	}
	enginetest.EventuallyNil(t, 20*time.Second, "the run at its wait", check(workflow.StatusWaiting))
	b.clock.Advance(time.Hour)
	enginetest.EventuallyNil(t, 20*time.Second, "the run past its wait", check(workflow.StatusCompleted))
}
