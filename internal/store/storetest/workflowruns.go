package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/workflow"
)

// wfClaimDue: four concurrent schedulers claiming 1,000 due runs get each
// run exactly once, as written: seq bumped, due at the lease's end.
func (s suite) wfClaimDue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "welcome", "cart.abandoned", t0)
	const n = 1000
	for e := range 10 {
		var runs []workflow.Run
		for i := range n / 10 {
			at := t0.Add(time.Duration(e*n/10+i) * time.Millisecond)
			runs = append(runs, newRun(fmt.Sprintf("run_%04d", e*n/10+i), "welcome", fmt.Sprintf("u%d", i), at))
		}
		startRuns(t, db, fmt.Sprintf("evt_%d", e), runs...)
	}
	now, lease := t0.Add(time.Hour), time.Hour
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		claims = map[string]int{}
	)
	for range 4 {
		wg.Go(func() {
			for {
				runs, err := db.ClaimDue(ctx, now, lease, 37)
				if err != nil {
					t.Errorf("ClaimDue: %v", err)
					return
				}
				if len(runs) == 0 {
					return
				}
				mu.Lock()
				for _, r := range runs {
					claims[r.ID]++
					if r.Seq != 1 || !r.DueAt.Equal(now.Add(lease)) || r.Status != workflow.StatusRunning || r.UserID == "" {
						t.Errorf("claimed run %+v; want seq 1, due at the lease's end", r)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claims) != n {
		t.Errorf("%d runs claimed, want %d", len(claims), n)
	}
	for id, c := range claims {
		if c != 1 {
			t.Errorf("run %s claimed %d times", id, c)
		}
	}
}

// wfLease: a claim keeps a run off every claim until its lease ends; the
// oldest due runs are claimed first; final runs and waits without a
// deadline are never due.
func (s suite) wfLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "welcome", "cart.abandoned", t0)
	startRuns(t, db, "evt_1", newRun("run_b", "welcome", "u1", t0.Add(time.Second)))
	startRuns(t, db, "evt_2", newRun("run_a", "welcome", "u1", t0))
	startRuns(t, db, "evt_3", newRun("run_c", "welcome", "u1", t0.Add(2*time.Second)))
	startRuns(t, db, "evt_4", waitingRun("run_forever", "welcome", "u1", t0, time.Time{}))
	done := newRun("run_done", "welcome", "u1", t0)
	startRuns(t, db, "evt_5", done)
	done.Status = workflow.StatusCompleted // DueAt left set: the store clears it
	if _, err := db.UpdateRun(ctx, done, 0); err != nil {
		t.Fatal(err)
	}
	ids := func(runs []workflow.Run, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatalf("ClaimDue: %v", err)
		}
		var out []string
		for _, r := range runs {
			out = append(out, r.ID)
		}
		slices.Sort(out)
		return out
	}
	lease := 30 * time.Second
	now := t0.Add(5 * time.Second)
	if got := ids(db.ClaimDue(ctx, now, lease, 2)); !slices.Equal(got, []string{"run_a", "run_b"}) {
		t.Errorf("ClaimDue(limit 2) = %q; want the two due first, run_a and run_b", got)
	}
	if got := ids(db.ClaimDue(ctx, now, lease, 10)); !slices.Equal(got, []string{"run_c"}) {
		t.Errorf("second ClaimDue = %q; want run_c only", got)
	}
	if got := ids(db.ClaimDue(ctx, now.Add(lease-time.Microsecond), lease, 10)); len(got) != 0 {
		t.Errorf("ClaimDue within the leases = %q; want none", got)
	}
	if _, ok, err := db.ClaimRun(ctx, "run_a", now.Add(lease-time.Microsecond), lease); ok || err != nil {
		t.Errorf("ClaimRun within the lease = %v, %v; want false", ok, err)
	}
	if got := ids(db.ClaimDue(ctx, now.Add(lease), lease, 10)); !slices.Equal(got, []string{"run_a", "run_b", "run_c"}) {
		t.Errorf("ClaimDue when the leases ended = %q; want the three again", got)
	}
	later := now.Add(2 * lease)
	r, ok, err := db.ClaimRun(ctx, "run_a", later, lease)
	if err != nil || !ok || r.Seq != 3 || !r.DueAt.Equal(later.Add(lease)) {
		t.Errorf("ClaimRun when due = %+v, %v, %v; want seq 3, due at the lease's end", r, ok, err)
	}
	for _, id := range []string{"run_forever", "run_done", "run_none"} {
		if _, ok, err := db.ClaimRun(ctx, id, later, lease); ok || err != nil {
			t.Errorf("ClaimRun(%s) = %v, %v; want false", id, ok, err)
		}
	}
	if got := ids(db.ClaimDue(ctx, t0.Add(1000*time.Hour), lease, 10)); !slices.Equal(got, []string{"run_a", "run_b", "run_c"}) {
		t.Errorf("ClaimDue far ahead = %q; want only the three running runs, never the final run or the wait without deadline", got)
	}
}

// wfUpdateRun: a write with the run's seq goes in whole and bumps seq; a
// stale seq is Conflict, an unknown run NotFound; a final run is due never.
func (s suite) wfUpdateRun(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "welcome", "cart.abandoned", t0)
	startRuns(t, db, "evt_1", newRun("run_1", "welcome", "u1", t0))
	claimed, ok, err := db.ClaimRun(ctx, "run_1", t0, time.Minute)
	if err != nil || !ok {
		t.Fatalf("ClaimRun = %v, %v", ok, err)
	}
	at := t0.Add(time.Second)
	next := waitingRun("run_1", "welcome", "u1", t0, at.Add(24*time.Hour))
	next.UpdatedAt = at
	next.Steps[0].Attempts = 2
	next.Data = json.RawMessage(`{"cart_id":"c1","n":2}`)
	got, err := db.UpdateRun(ctx, next, claimed.Seq)
	next.Seq = claimed.Seq + 1
	if err != nil || got.Seq != 2 {
		t.Fatalf("UpdateRun = %+v, %v; want seq 2", got, err)
	}
	if diff := sameRun(getRun(t, db, "run_1"), next); diff != "" {
		t.Errorf("run after UpdateRun (steps' until and attempts included):%s", diff)
	}
	if _, err := db.UpdateRun(ctx, next, claimed.Seq); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("UpdateRun with a stale seq = %v, want Conflict", err)
	}
	if diff := sameRun(getRun(t, db, "run_1"), next); diff != "" {
		t.Errorf("a stale UpdateRun wrote:%s", diff)
	}
	ghost := next
	ghost.ID = "run_none"
	if _, err := db.UpdateRun(ctx, ghost, 0); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("UpdateRun of an unknown run = %v, want NotFound", err)
	}
	final := next
	final.Status, final.WaitEvent, final.WaitMatch = workflow.StatusFailed, "", nil
	if got, err := db.UpdateRun(ctx, final, 2); err != nil || got.Seq != 3 || !got.DueAt.IsZero() {
		t.Errorf("UpdateRun to failed = %+v, %v; want seq 3 and no DueAt", got, err)
	}
	if r := getRun(t, db, "run_1"); r.Status != workflow.StatusFailed || !r.DueAt.IsZero() {
		t.Errorf("failed run = %+v; want failed, due never", r)
	}
}

// wfWaitingRuns: a user's runs waiting for one event, deadline not
// passed; other users, other events, running runs and passed deadlines
// are left out.
func (s suite) wfWaitingRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "welcome", "cart.abandoned", t0)
	now := t0.Add(time.Hour)
	other := waitingRun("run_other_event", "welcome", "u1", t0, now.Add(time.Hour))
	other.WaitEvent = "email.opened"
	running := newRun("run_running", "welcome", "u1", t0)
	running.WaitEvent = "order.placed" // not waiting: left out all the same
	for i, r := range []workflow.Run{
		waitingRun("run_1", "welcome", "u1", t0, now.Add(time.Second)),
		waitingRun("run_2", "welcome", "u1", t0.Add(time.Second), time.Time{}),
		waitingRun("run_passed", "welcome", "u1", t0, now),
		waitingRun("run_u2", "welcome", "u2", t0, now.Add(time.Hour)),
		other, running,
	} {
		startRuns(t, db, fmt.Sprintf("evt_%d", i), r)
	}
	ids := func(user, event string, limit int) []string {
		runs, err := db.WaitingRuns(ctx, user, event, now, limit)
		if err != nil {
			t.Fatalf("WaitingRuns: %v", err)
		}
		out := []string{}
		for _, r := range runs {
			out = append(out, r.ID)
		}
		return out
	}
	if got := ids("u1", "order.placed", 100); !slices.Equal(got, []string{"run_1", "run_2"}) {
		t.Errorf("WaitingRuns(u1, order.placed) = %q; want run_1 and run_2, oldest first", got)
	}
	if got := ids("u1", "order.placed", 1); len(got) != 1 {
		t.Errorf("WaitingRuns(limit 1) = %q; want one", got)
	}
	if got := ids("u1", "email.opened", 100); !slices.Equal(got, []string{"run_other_event"}) {
		t.Errorf("WaitingRuns(u1, email.opened) = %q", got)
	}
	if got := ids("u3", "order.placed", 100); len(got) != 0 {
		t.Errorf("WaitingRuns(u3) = %q; want none", got)
	}
}

// wfRunsPaging: newest first, ties broken by id, pages joined give every
// run once, filters by workflow, user and status.
func (s suite) wfRunsPaging(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "a", "cart.abandoned", t0)
	putWF(t, db, "b", "cart.abandoned", t0)
	var want, wantU1 []string // newest first
	for i := range 25 {
		at := t0.Add(time.Duration(i/2) * time.Second) // pairs share a time
		user := []string{"u1", "u2"}[i%2]
		startRuns(t, db, fmt.Sprintf("evt_%d", i), newRun(fmt.Sprintf("run_a%02d", i), "a", user, at))
		want = append([]string{fmt.Sprintf("run_a%02d", i)}, want...)
		if user == "u1" {
			wantU1 = append([]string{fmt.Sprintf("run_a%02d", i)}, wantU1...)
		}
	}
	for i := range 5 {
		startRuns(t, db, fmt.Sprintf("evt_b%d", i), newRun(fmt.Sprintf("run_b%d", i), "b", "u1", t0))
	}
	all := func(f workflow.RunFilter, limit int) (ids []string, pages int) {
		cursor := ""
		for {
			runs, next, err := db.Runs(ctx, f, cursor, limit)
			if err != nil {
				t.Fatalf("Runs(%+v): %v", f, err)
			}
			pages++
			for _, r := range runs {
				ids = append(ids, r.ID)
			}
			if next == "" || pages > 100 {
				return ids, pages
			}
			cursor = next
		}
	}
	if got, pages := all(workflow.RunFilter{Workflow: "a"}, 10); !slices.Equal(got, want) || pages != 3 {
		t.Errorf("Runs(a) in pages of 10 = %q in %d pages; want %q in 3", got, pages, want)
	}
	if got, _ := all(workflow.RunFilter{Workflow: "a", UserID: "u1"}, 4); !slices.Equal(got, wantU1) {
		t.Errorf("Runs(a, u1) = %q; want %q", got, wantU1)
	}
	if got, pages := all(workflow.RunFilter{}, 7); len(got) != 30 || pages != 5 {
		t.Errorf("Runs() = %d runs in %d pages; want 30 in 5", len(got), pages)
	}
	if _, err := db.CancelRuns(ctx, "a", "", "run_a03", t0); err != nil {
		t.Fatal(err)
	}
	if got, _ := all(workflow.RunFilter{Workflow: "a", Status: workflow.StatusCanceled}, 10); !slices.Equal(got, []string{"run_a03"}) {
		t.Errorf("Runs(a, canceled) = %q; want run_a03", got)
	}
	if got, _ := all(workflow.RunFilter{UserID: "u2", Workflow: "b"}, 10); len(got) != 0 {
		t.Errorf("Runs(b, u2) = %q; want none", got)
	}
	if _, _, err := db.Runs(ctx, workflow.RunFilter{Workflow: "a"}, "not a cursor", 10); !apperr.Is(err, apperr.Invalid) {
		t.Errorf("Runs with a bad cursor = %v, want Invalid", err)
	}
}

// wfCancel: by user or by run, live runs only; the open step ends
// canceled, a run between steps gets a canceled record of its next step.
func (s suite) wfCancel(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "welcome", "cart.abandoned", t0)
	putWF(t, db, "other", "cart.abandoned", t0)
	running, waiting := newRun("run_1", "welcome", "u1", t0), waitingRun("run_2", "welcome", "u1", t0, t0.Add(time.Hour))
	done := newRun("run_3", "welcome", "u1", t0)
	for i, r := range []workflow.Run{running, waiting, done, newRun("run_4", "welcome", "u2", t0), newRun("run_5", "other", "u1", t0)} {
		startRuns(t, db, fmt.Sprintf("evt_%d", i), r)
	}
	done.Status = workflow.StatusCompleted
	if _, err := db.UpdateRun(ctx, done, 0); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Minute)
	ids, err := db.CancelRuns(ctx, "welcome", "u1", "", at)
	if slices.Sort(ids); err != nil || !slices.Equal(ids, []string{"run_1", "run_2"}) {
		t.Fatalf("CancelRuns(welcome, u1) = %q, %v; want run_1 and run_2", ids, err)
	}
	running.Status, running.Seq, running.DueAt, running.UpdatedAt = workflow.StatusCanceled, 1, time.Time{}, at
	running.Steps = []workflow.StepRecord{{Index: 0, Name: "welcome", Kind: "send", Status: "canceled", StartedAt: at, EndedAt: at, Outcome: "canceled"}}
	if diff := sameRun(getRun(t, db, "run_1"), running); diff != "" {
		t.Errorf("a running run canceled:%s", diff)
	}
	waiting.Status, waiting.Seq, waiting.DueAt, waiting.UpdatedAt = workflow.StatusCanceled, 1, time.Time{}, at
	waiting.Steps[1].Status, waiting.Steps[1].EndedAt, waiting.Steps[1].Outcome = "canceled", at, "canceled"
	if diff := sameRun(getRun(t, db, "run_2"), waiting); diff != "" {
		t.Errorf("a waiting run canceled:%s", diff)
	}
	if r := getRun(t, db, "run_3"); r.Status != workflow.StatusCompleted {
		t.Errorf("a completed run became %s", r.Status)
	}
	if r := getRun(t, db, "run_5"); r.Status != workflow.StatusRunning {
		t.Errorf("another workflow's run of u1 became %s", r.Status)
	}
	if ids, err := db.CancelRuns(ctx, "welcome", "u1", "", at); err != nil || ids == nil || len(ids) != 0 {
		t.Errorf("CancelRuns again = %#v, %v; want an empty list", ids, err)
	}
	if ids, err := db.CancelRuns(ctx, "other", "", "run_4", at); err != nil || len(ids) != 0 {
		t.Errorf("CancelRuns of another workflow's run = %q, %v; want none", ids, err)
	}
	if ids, err := db.CancelRuns(ctx, "welcome", "", "run_4", at); err != nil || !slices.Equal(ids, []string{"run_4"}) {
		t.Errorf("CancelRuns(run_4) = %q, %v", ids, err)
	}
	if _, err := db.CancelRuns(ctx, "welcome", "", "", at); !apperr.Is(err, apperr.Invalid) {
		t.Errorf("CancelRuns naming neither user nor run = %v, want Invalid", err)
	}
	if _, err := db.UpdateRun(ctx, waitingRun("run_2", "welcome", "u1", t0, at), 0); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("the scheduler's write of a canceled run = %v, want Conflict", err)
	}
}

// wfCounts: live runs per workflow and status, and per user.
func (s suite) wfCounts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "a", "cart.abandoned", t0)
	putWF(t, db, "b", "cart.abandoned", t0)
	if got, err := db.CountRuns(ctx); err != nil || len(got) != 0 {
		t.Errorf("CountRuns of none = %v, %v", got, err)
	}
	for i, r := range []workflow.Run{
		newRun("run_1", "a", "u1", t0), newRun("run_2", "a", "u2", t0),
		waitingRun("run_3", "a", "u1", t0, time.Time{}), waitingRun("run_4", "a", "u1", t0, t0), waitingRun("run_5", "a", "u2", t0, t0),
		waitingRun("run_6", "b", "u1", t0, t0), newRun("run_7", "b", "u1", t0),
	} {
		startRuns(t, db, fmt.Sprintf("evt_%d", i), r)
	}
	if _, err := db.CancelRuns(ctx, "b", "", "run_7", t0); err != nil {
		t.Fatal(err)
	}
	got, err := db.CountRuns(ctx)
	want := map[string]map[workflow.Status]int64{"a": {"running": 2, "waiting": 3}, "b": {"waiting": 1}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("CountRuns = %v, %v; want %v", got, err, want)
	}
	for user, want := range map[string]int{"u1": 4, "u2": 2, "u3": 0} {
		if n, err := db.CountLiveRuns(ctx, user); err != nil || n != want {
			t.Errorf("CountLiveRuns(%s) = %d, %v; want %d", user, n, err, want)
		}
	}
}
