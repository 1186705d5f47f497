package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/workflow"
)

// workflows pins workflow.Store: definitions by version, events and the
// runs they start and resume, the scheduler's claims, listings, cancels,
// counts and user attributes (this file and workflowruns.go).
func (s suite) workflows(t *testing.T) {
	t.Run("Versions", s.wfVersions)
	t.Run("DeleteWhileEventsStart", s.wfDeleteRace)
	t.Run("TriggeredBy", s.wfTriggeredBy)
	t.Run("EventIdempotency", s.wfEventIdempotency)
	t.Run("OncePer", s.wfOncePer)
	t.Run("ResumeCAS", s.wfResumeCAS)
	t.Run("ClaimDueConcurrent", s.wfClaimDue)
	t.Run("LeaseExpiry", s.wfLease)
	t.Run("UpdateRun", s.wfUpdateRun)
	t.Run("WaitingRuns", s.wfWaitingRuns)
	t.Run("RunsPaging", s.wfRunsPaging)
	t.Run("Cancel", s.wfCancel)
	t.Run("Counts", s.wfCounts)
	t.Run("UserAttributes", s.userAttributes)
	t.Run("Retention", s.wfRetention)               // workflowretention.go
	t.Run("UserAttributesCap", s.userAttributesCap) // workflowretention.go
}

// wfDefinition is a definition with two steps: a send named welcome, then
// a wait_for.
func wfDefinition(trigger string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"trigger":{"event":%q},"steps":[{"name":"welcome","send":"welcome"},`+
		`{"wait_for":{"event":"order.placed","timeout":"24h"}}]}`, trigger))
}

func putWF(t *testing.T, db *store.DB, key, trigger string, at time.Time) workflow.Stored {
	t.Helper()
	w, err := db.PutWorkflow(t.Context(), workflow.Stored{Key: key, Trigger: trigger, Definition: wfDefinition(trigger)}, at)
	if err != nil {
		t.Fatalf("PutWorkflow(%s): %v", key, err)
	}
	return w
}

// newRun is a run of wf for user, as an event at at starts it: running,
// due at once, at its first step.
func newRun(id, wf, user string, at time.Time) workflow.Run {
	return workflow.Run{ID: id, Workflow: wf, Version: 1, UserID: user, Status: workflow.StatusRunning,
		Data: json.RawMessage(`{"cart_id":"c1"}`), DueAt: at, EventID: "evt_" + id, CreatedAt: at, UpdatedAt: at}
}

// waitingRun is newRun having sent its welcome and waiting for an
// order.placed of cart c1 until until (zero: without deadline).
func waitingRun(id, wf, user string, at, until time.Time) workflow.Run {
	r := newRun(id, wf, user, at)
	r.Status, r.Position, r.WaitEvent, r.WaitMatch, r.DueAt = workflow.StatusWaiting, 1, "order.placed", json.RawMessage(`{"cart_id":"c1"}`), until
	r.Steps = []workflow.StepRecord{
		{Index: 0, Name: "welcome", Kind: "send", Status: "completed", StartedAt: at, EndedAt: at, NotificationID: "ntf_" + id},
		{Index: 1, Kind: "wait_for", Status: "waiting", StartedAt: at, Until: until},
	}
	return r
}

func wfEvent(id, reqID, user string, at time.Time) workflow.Event {
	return workflow.Event{ID: id, RequestID: reqID, Name: "cart.abandoned", UserID: user,
		Data: json.RawMessage(`{"cart_id":"c1"}`), Hash: "h-" + id, CreatedAt: at}
}

// startRuns saves an event starting runs, checking they all started.
func startRuns(t *testing.T, db *store.DB, eventID string, runs ...workflow.Run) {
	t.Helper()
	e, created, err := db.RecordEvent(t.Context(), wfEvent(eventID, "", runs[0].UserID, runs[0].CreatedAt), runs, nil, nil)
	if err != nil || !created || len(e.RunsStarted) != len(runs) {
		t.Fatalf("RecordEvent(%s) = %+v, %v, %v; want %d runs started", eventID, e, created, err, len(runs))
	}
}

// sameRun describes how got differs from want ("" when it does not),
// comparing their JSON (times as instants, empty steps as none).
func sameRun(got, want workflow.Run) string {
	norm := func(r workflow.Run) string {
		r.CreatedAt, r.UpdatedAt, r.DueAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC(), r.DueAt.UTC()
		if len(r.Steps) == 0 {
			r.Steps = nil
		}
		for i := range r.Steps {
			s := &r.Steps[i]
			s.StartedAt, s.EndedAt, s.Until = s.StartedAt.UTC(), s.EndedAt.UTC(), s.Until.UTC()
		}
		b, _ := json.Marshal(r)
		return string(b)
	}
	if g, w := norm(got), norm(want); g != w {
		return fmt.Sprintf("\n got %s\nwant %s", g, w)
	}
	return ""
}

func getRun(t *testing.T, db *store.DB, id string) workflow.Run {
	t.Helper()
	r, err := db.Run(t.Context(), id)
	if err != nil {
		t.Fatalf("Run(%s): %v", id, err)
	}
	return r
}

// wfVersions: a put numbers versions, keeps the first CreatedAt and every
// old version; a delete hides the key, keeps its versions, cancels its
// live runs and stops new ones; a put after it numbers on.
func (s suite) wfVersions(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	v1 := putWF(t, db, "welcome", "user.signed_up", t0)
	if v1.Version != 1 || !v1.CreatedAt.Equal(t0) || !v1.UpdatedAt.Equal(t0) {
		t.Fatalf("first PutWorkflow = %+v; want version 1 created and updated at t0", v1)
	}
	later := t0.Add(time.Minute)
	v2, err := db.PutWorkflow(ctx, workflow.Stored{Key: "welcome", Trigger: "cart.abandoned", Definition: wfDefinition("cart.abandoned")}, later)
	if err != nil || v2.Version != 2 || !v2.CreatedAt.Equal(t0) || !v2.UpdatedAt.Equal(later) {
		t.Fatalf("second PutWorkflow = %+v, %v; want version 2, created at t0, updated a minute later", v2, err)
	}
	putWF(t, db, "another", "x", t0)
	if got, err := db.Workflow(ctx, "welcome"); err != nil || got.Version != 2 || got.Trigger != "cart.abandoned" ||
		!bytes.Equal(got.Definition, v2.Definition) || !got.CreatedAt.Equal(t0) {
		t.Errorf("Workflow = %+v, %v; want version 2", got, err)
	}
	if old, err := db.WorkflowVersion(ctx, "welcome", 1); err != nil || old.Version != 1 || old.Trigger != "user.signed_up" ||
		!bytes.Equal(old.Definition, v1.Definition) {
		t.Errorf("WorkflowVersion(1) = %+v, %v; want the first version", old, err)
	}
	for _, err := range []error{
		second(db.WorkflowVersion(ctx, "welcome", 3)), second(db.Workflow(ctx, "none")), second(db.DeleteWorkflow(ctx, "none", later)),
	} {
		if !apperr.Is(err, apperr.NotFound) {
			t.Errorf("a missing version or key: %v, want NotFound", err)
		}
	}
	if all, err := db.Workflows(ctx); err != nil || len(all) != 2 || all[0].Key != "another" || all[1].Key != "welcome" || all[1].Version != 2 {
		t.Errorf("Workflows = %+v, %v; want another, then welcome at version 2", all, err)
	}

	running, waiting, done := newRun("run_a", "welcome", "u1", t0), waitingRun("run_b", "welcome", "u2", t0, later.Add(time.Hour)), newRun("run_c", "welcome", "u3", t0)
	startRuns(t, db, "evt_1", running)
	startRuns(t, db, "evt_2", waiting)
	startRuns(t, db, "evt_3", done)
	done.Status, done.Steps = workflow.StatusCompleted, []workflow.StepRecord{{Index: 0, Kind: "send", Status: "completed", StartedAt: t0, EndedAt: t0}}
	done, err = db.UpdateRun(ctx, done, 0)
	if err != nil {
		t.Fatal(err)
	}
	at := later.Add(time.Second)
	if n, err := db.DeleteWorkflow(ctx, "welcome", at); err != nil || n != 2 {
		t.Fatalf("DeleteWorkflow = %d, %v; want its 2 live runs canceled", n, err)
	}
	for _, id := range []string{"run_a", "run_b"} {
		if r := getRun(t, db, id); r.Status != workflow.StatusCanceled || !r.DueAt.IsZero() || r.Seq != 1 ||
			r.Steps[len(r.Steps)-1].Status != "canceled" || !r.Steps[len(r.Steps)-1].EndedAt.Equal(at) {
			t.Errorf("run %s after the delete: %+v; want canceled, not due, seq 1, its last step canceled", id, r)
		}
	}
	if diff := sameRun(getRun(t, db, "run_c"), done); diff != "" {
		t.Errorf("a completed run changed with its workflow's delete:%s", diff)
	}
	if _, err := db.Workflow(ctx, "welcome"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("Workflow after delete: %v, want NotFound", err)
	}
	if old, err := db.WorkflowVersion(ctx, "welcome", 2); err != nil || old.Version != 2 {
		t.Errorf("WorkflowVersion(2) after delete = %+v, %v; want it kept", old, err)
	}
	if all, _ := db.Workflows(ctx); len(all) != 1 {
		t.Errorf("Workflows after delete = %+v; want another only", all)
	}
	if got, _ := db.WorkflowsTriggeredBy(ctx, "cart.abandoned"); len(got) != 0 {
		t.Errorf("WorkflowsTriggeredBy after delete = %+v; want none", got)
	}
	if _, err := db.DeleteWorkflow(ctx, "welcome", at); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("DeleteWorkflow again: %v, want NotFound", err)
	}
	// An event that read the definition before the delete starts nothing.
	e, created, err := db.RecordEvent(ctx, wfEvent("evt_4", "", "u4", at), []workflow.Run{newRun("run_d", "welcome", "u4", at)}, nil, nil)
	if err != nil || !created || len(e.RunsStarted) != 0 {
		t.Errorf("RecordEvent starting a run of a deleted workflow = %+v, %v, %v; want it saved, starting none", e, created, err)
	}
	if v3 := putWF(t, db, "welcome", "cart.abandoned", at); v3.Version != 3 || !v3.CreatedAt.Equal(at) {
		t.Errorf("PutWorkflow after delete = %+v; want version 3 (never reused), created anew", v3)
	}
}

func second[T any](_ T, err error) error { return err }

// wfDeleteRace: events starting runs of a workflow while it is deleted
// leave none of its runs live: each event either started its run before
// the delete (which cancels it) or starts none.
func (s suite) wfDeleteRace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	for round := range 5 {
		key := fmt.Sprintf("w%d", round)
		putWF(t, db, key, "cart.abandoned", t0)
		var (
			wg   sync.WaitGroup
			gate = make(chan struct{})
		)
		for i := range 20 {
			wg.Go(func() {
				<-gate
				id := fmt.Sprintf("%s_%d", key, i)
				if _, _, err := db.RecordEvent(ctx, wfEvent("evt_"+id, "", "u1", t0), []workflow.Run{newRun("run_"+id, key, "u1", t0)}, nil, nil); err != nil {
					t.Errorf("RecordEvent: %v", err)
				}
			})
		}
		wg.Go(func() {
			<-gate
			if _, err := db.DeleteWorkflow(ctx, key, t0); err != nil {
				t.Errorf("DeleteWorkflow: %v", err)
			}
		})
		close(gate)
		wg.Wait()
		if live, _, err := db.Runs(ctx, workflow.RunFilter{Workflow: key, Status: workflow.StatusRunning}, "", 100); err != nil || len(live) != 0 {
			t.Errorf("runs of %s live after its delete: %d, %v; want none", key, len(live), err)
		}
	}
}

// wfTriggeredBy: the lookup follows each key's current version.
func (s suite) wfTriggeredBy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "b", "cart.abandoned", t0)
	putWF(t, db, "a", "cart.abandoned", t0)
	putWF(t, db, "c", "order.placed", t0)
	putWF(t, db, "d", "", t0)
	keys := func(event string) []string {
		ws, err := db.WorkflowsTriggeredBy(ctx, event)
		if err != nil {
			t.Fatalf("WorkflowsTriggeredBy(%s): %v", event, err)
		}
		var out []string
		for _, w := range ws {
			out = append(out, fmt.Sprintf("%s@%d", w.Key, w.Version))
		}
		return out
	}
	if got := keys("cart.abandoned"); !slices.Equal(got, []string{"a@1", "b@1"}) {
		t.Errorf("WorkflowsTriggeredBy(cart.abandoned) = %q; want a@1 b@1", got)
	}
	putWF(t, db, "b", "order.placed", t0.Add(time.Second))
	if got := keys("cart.abandoned"); !slices.Equal(got, []string{"a@1"}) {
		t.Errorf("after b's trigger changed, WorkflowsTriggeredBy(cart.abandoned) = %q; want a@1", got)
	}
	if got := keys("order.placed"); !slices.Equal(got, []string{"b@2", "c@1"}) {
		t.Errorf("WorkflowsTriggeredBy(order.placed) = %q; want b@2 c@1", got)
	}
	if got := keys("unknown"); len(got) != 0 {
		t.Errorf("WorkflowsTriggeredBy(unknown) = %q; want none", got)
	}
}

// wfEventIdempotency: a request_id saves one event and its runs; a repeat
// (even with another body, even concurrent) changes nothing and gets the
// first answer; events without request_id are each saved.
func (s suite) wfEventIdempotency(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "welcome", "cart.abandoned", t0)
	first, created, err := db.RecordEvent(ctx, wfEvent("evt_1", "req-1", "u1", t0), []workflow.Run{newRun("run_1", "welcome", "u1", t0)}, nil, nil)
	if err != nil || !created || first.ID != "evt_1" || !slices.Equal(first.RunsStarted, []string{"run_1"}) || len(first.RunsResumed) != 0 {
		t.Fatalf("RecordEvent = %+v, %v, %v; want evt_1 created, starting run_1", first, created, err)
	}
	got, err := db.EventByRequestID(ctx, "req-1")
	if err != nil || got.ID != "evt_1" || got.RequestID != "req-1" || got.Hash != "h-evt_1" || got.Name != "cart.abandoned" ||
		got.UserID != "u1" || string(got.Data) != `{"cart_id":"c1"}` || !got.CreatedAt.Equal(t0) ||
		!slices.Equal(got.RunsStarted, []string{"run_1"}) || got.RunsResumed == nil || len(got.RunsResumed) != 0 {
		t.Errorf("EventByRequestID = %+v, %v; want evt_1 with its answer", got, err)
	}
	other := wfEvent("evt_2", "req-1", "u1", t0.Add(time.Second))
	other.Hash = "another body"
	again, created, err := db.RecordEvent(ctx, other, []workflow.Run{newRun("run_2", "welcome", "u1", t0)}, nil, nil)
	if err != nil || created || again.ID != "evt_1" || again.Hash != "h-evt_1" || !slices.Equal(again.RunsStarted, []string{"run_1"}) {
		t.Errorf("RecordEvent with a taken request_id = %+v, %v, %v; want evt_1 and created false", again, created, err)
	}
	if _, err := db.Run(ctx, "run_2"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("the repeat's run: %v, want NotFound (never started)", err)
	}
	for _, id := range []string{"evt_3", "evt_4"} {
		if e, created, err := db.RecordEvent(ctx, wfEvent(id, "", "u1", t0), nil, nil, nil); err != nil || !created || e.ID != id {
			t.Errorf("RecordEvent(%s) without request_id = %+v, %v, %v; want created", id, e, created, err)
		}
	}
	if _, err := db.EventByRequestID(ctx, "req-none"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("EventByRequestID(unknown) = %v, want NotFound", err)
	}

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []string
		answers = map[string]bool{}
	)
	for i := range 10 {
		wg.Go(func() {
			id := fmt.Sprintf("evt_c%d", i)
			e, created, err := db.RecordEvent(ctx, wfEvent(id, "req-c", "u2", t0), []workflow.Run{newRun("run_c"+id, "welcome", "u2", t0)}, nil, nil)
			if err != nil {
				t.Errorf("concurrent RecordEvent: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if created {
				winners = append(winners, id)
			}
			answers[e.ID+" "+fmt.Sprint(e.RunsStarted)] = true
		})
	}
	wg.Wait()
	if len(winners) != 1 || len(answers) != 1 || !answers[winners[0]+" [run_c"+winners[0]+"]"] {
		t.Errorf("10 concurrent events with one request_id: created %q, answers %v; want one created, all answered with its event and run", winners, answers)
	}
	if runs, _, err := db.Runs(ctx, workflow.RunFilter{UserID: "u2"}, "", 100); err != nil || len(runs) != 1 {
		t.Errorf("runs of the concurrent events = %d, %v; want 1", len(runs), err)
	}
}

// wfOncePer: with entry.once_per, of 20 concurrent events for one user
// exactly one starts a run (on PostgreSQL, group commit runs them in up to
// four transactions at once); the window is measured from the run's
// CreatedAt and is per user and workflow.
func (s suite) wfOncePer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "onboard", "cart.abandoned", t0)
	putWF(t, db, "nolimit", "cart.abandoned", t0)
	oncePer := map[string]time.Duration{"onboard": 24 * time.Hour}
	event := func(i int, user string, at time.Time) []string {
		id := fmt.Sprintf("%s_%d", user, i)
		e, _, err := db.RecordEvent(ctx, wfEvent("evt_"+id, "", user, at),
			[]workflow.Run{newRun("run_o"+id, "onboard", user, at), newRun("run_n"+id, "nolimit", user, at)}, oncePer, nil)
		if err != nil {
			t.Errorf("RecordEvent(%s): %v", id, err)
		}
		return e.RunsStarted
	}
	// A round per user (u0 to u9): 20 events let go at once.
	all := 0
	for u := range 10 {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			gate    = make(chan struct{})
			onboard int
			user    = fmt.Sprintf("u%d", u)
		)
		for i := range 20 {
			wg.Go(func() {
				<-gate
				ids := event(i, user, t0.Add(time.Duration(i)*time.Millisecond))
				mu.Lock()
				defer mu.Unlock()
				for _, id := range ids {
					if id[:5] == "run_o" {
						onboard++
					}
				}
				all += len(ids)
			})
		}
		close(gate)
		wg.Wait()
		if onboard != 1 {
			t.Errorf("20 concurrent events of %s started %d runs of onboard, want 1", user, onboard)
		}
	}
	if all != 210 {
		t.Errorf("200 events started %d runs, want 210 (nolimit has no once_per)", all)
	}
	u1 := "u1"
	if got := event(30, "u10", t0.Add(time.Hour)); len(got) != 2 {
		t.Errorf("another user's event started %q; want both workflows", got)
	}
	if got := event(31, u1, t0.Add(23*time.Hour)); len(got) != 1 {
		t.Errorf("u1's event within once_per started %q; want nolimit's run only", got)
	}
	if got := event(32, u1, t0.Add(24*time.Hour+time.Second)); len(got) != 2 {
		t.Errorf("u1's event after once_per started %q; want both workflows", got)
	}
}

// wfResumeCAS: a resume is written only while the run's seq holds; of
// concurrent resumes with one seq, one is written.
func (s suite) wfResumeCAS(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "welcome", "cart.abandoned", t0)
	w := waitingRun("run_w", "welcome", "u1", t0, t0.Add(24*time.Hour))
	startRuns(t, db, "evt_0", w)
	at := t0.Add(time.Hour)
	resumed := w
	resumed.Status, resumed.Position, resumed.DueAt, resumed.UpdatedAt = workflow.StatusRunning, 2, at, at
	resumed.WaitEvent, resumed.WaitMatch = "", nil
	resumed.Data = json.RawMessage(`{"cart_id":"c1","order.placed":{"cart_id":"c1"}}`)
	resumed.Steps = slices.Clone(w.Steps)
	resumed.Steps[1].Status, resumed.Steps[1].EndedAt = "completed", at
	e, _, err := db.RecordEvent(ctx, wfEvent("evt_1", "", "u1", at), nil, nil, []workflow.Resume{{Run: resumed, Seq: 0}})
	if err != nil || !slices.Equal(e.RunsResumed, []string{"run_w"}) || len(e.RunsStarted) != 0 {
		t.Fatalf("RecordEvent resuming run_w = %+v, %v; want it resumed", e, err)
	}
	resumed.Seq = 1
	if diff := sameRun(getRun(t, db, "run_w"), resumed); diff != "" {
		t.Errorf("run_w after its resume:%s", diff)
	}
	stale := resumed
	stale.Data, stale.Position = json.RawMessage(`{"stale":true}`), 5
	e, _, err = db.RecordEvent(ctx, wfEvent("evt_2", "", "u1", at), nil, nil, []workflow.Resume{{Run: stale, Seq: 0}})
	if err != nil || len(e.RunsResumed) != 0 {
		t.Errorf("RecordEvent with a stale seq = %+v, %v; want nothing resumed", e, err)
	}
	if diff := sameRun(getRun(t, db, "run_w"), resumed); diff != "" {
		t.Errorf("a stale resume was written:%s", diff)
	}

	var (
		wg sync.WaitGroup
		mu sync.Mutex
		n  int
	)
	for i := range 10 {
		wg.Go(func() {
			r := resumed
			r.Data = json.RawMessage(fmt.Sprintf(`{"by":%d}`, i))
			e, _, err := db.RecordEvent(ctx, wfEvent(fmt.Sprintf("evt_c%d", i), "", "u1", at), nil, nil, []workflow.Resume{{Run: r, Seq: 1}})
			if err != nil {
				t.Errorf("concurrent RecordEvent: %v", err)
			}
			mu.Lock()
			n += len(e.RunsResumed)
			mu.Unlock()
		})
	}
	wg.Wait()
	if r := getRun(t, db, "run_w"); n != 1 || r.Seq != 2 {
		t.Errorf("10 concurrent resumes at seq 1: %d written, run at seq %d; want 1 and 2", n, r.Seq)
	}
}

// userAttributes: none reads {}, a put replaces the object.
func (s suite) userAttributes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	if a, err := db.UserAttributes(ctx, "u1"); err != nil || string(a) != `{}` {
		t.Errorf("UserAttributes of a user without = %s, %v; want {}", a, err)
	}
	for _, attrs := range []string{`{"plan":"pro","country":"DE"}`, `{"plan":"free"}`} {
		if err := db.PutUserAttributes(ctx, "u1", json.RawMessage(attrs), t0); err != nil {
			t.Fatalf("PutUserAttributes: %v", err)
		}
		if a, err := db.UserAttributes(ctx, "u1"); err != nil || string(a) != attrs {
			t.Errorf("UserAttributes = %s, %v; want %s", a, err, attrs)
		}
	}
	if a, err := db.UserAttributes(ctx, "u2"); err != nil || string(a) != `{}` {
		t.Errorf("UserAttributes of another user = %s, %v; want {}", a, err)
	}
}
