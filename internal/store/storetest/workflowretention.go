package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/workflow"
)

// wfRetention: DeleteWorkflowEventsBefore deletes the events taken in
// before its time, oldest first, limit at a time, and none after it;
// DeleteEndedRunsBefore deletes the runs that ended before its time,
// whatever their status, and never a live run however old.
func (s suite) wfRetention(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	putWF(t, db, "cart", "cart.abandoned", t0)
	var events []string
	for i := range 5 { // one event a day, each starting a run
		at := t0.Add(time.Duration(i) * 24 * time.Hour)
		e := wfEvent(notify.NewID("evt_", at), fmt.Sprintf("req-%d", i), fmt.Sprintf("u%d", i), at)
		r := newRun(notify.NewID("run_", at), "cart", e.UserID, at)
		r.EventID = e.ID
		if _, _, err := db.RecordEvent(ctx, e, []workflow.Run{r}, nil, nil); err != nil {
			t.Fatal(err)
		}
		events = append(events, e.RequestID)
	}
	cut := t0.Add(3 * 24 * time.Hour) // before the events of days 3 and 4
	if n, err := db.DeleteWorkflowEventsBefore(ctx, cut, 2); err != nil || n != 2 {
		t.Fatalf("DeleteWorkflowEventsBefore(limit 2) = %d, %v; want 2", n, err)
	}
	if n, err := db.DeleteWorkflowEventsBefore(ctx, cut, 2); err != nil || n != 1 {
		t.Fatalf("DeleteWorkflowEventsBefore again = %d, %v; want the third", n, err)
	}
	if n, err := db.DeleteWorkflowEventsBefore(ctx, cut, 2); err != nil || n != 0 {
		t.Fatalf("DeleteWorkflowEventsBefore a third time = %d, %v; want none left", n, err)
	}
	if left := eventsLeft(t, db, events); !slices.Equal(left, events[3:]) {
		t.Errorf("events left %v, want %v", left, events[3:])
	}

	// Runs: the ones of days 1-3 end an hour in, one of each final status;
	// the one of day 0 stays live (running) although the oldest.
	runs, _, err := db.Runs(ctx, workflow.RunFilter{Workflow: "cart"}, "", 100)
	if err != nil || len(runs) != 5 {
		t.Fatalf("Runs = %d, %v; want 5", len(runs), err)
	}
	slices.Reverse(runs) // oldest first: runs[i] started on day i
	for i, st := range []workflow.Status{workflow.StatusCompleted, workflow.StatusCanceled, workflow.StatusFailed} {
		r := runs[i+1]
		r.Status, r.DueAt, r.UpdatedAt = st, time.Time{}, r.CreatedAt.Add(time.Hour)
		if _, err := db.UpdateRun(ctx, r, r.Seq); err != nil {
			t.Fatal(err)
		}
	}
	// The one of day 4 ends after the cut.
	last := runs[4]
	last.Status, last.DueAt, last.UpdatedAt = workflow.StatusCompleted, time.Time{}, last.CreatedAt.Add(time.Hour)
	if _, err := db.UpdateRun(ctx, last, last.Seq); err != nil {
		t.Fatal(err)
	}
	if n, err := db.DeleteEndedRunsBefore(ctx, cut.Add(2*time.Hour), 2); err != nil || n != 2 {
		t.Fatalf("DeleteEndedRunsBefore(limit 2) = %d, %v; want 2", n, err)
	}
	if n, err := db.DeleteEndedRunsBefore(ctx, cut.Add(2*time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("DeleteEndedRunsBefore = %d, %v; want the third ended run", n, err)
	}
	left, _, err := db.Runs(ctx, workflow.RunFilter{Workflow: "cart"}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range left {
		ids = append(ids, r.ID)
	}
	if want := []string{runs[4].ID, runs[0].ID}; !slices.Equal(ids, want) {
		t.Errorf("runs left %v, want the one ended on day 4 and the live one %v", ids, want)
	}
	if n, err := db.DeleteEndedRunsBefore(ctx, t0.Add(365*24*time.Hour), 100); err != nil || n != 1 {
		t.Errorf("DeleteEndedRunsBefore a year on = %d, %v; want 1 (never the live run)", n, err)
	}
	if r := getRun(t, db, runs[0].ID); r.Status != workflow.StatusRunning {
		t.Errorf("the live run is %s, want running", r.Status)
	}
}

// eventsLeft returns which of the events of requestIDs are still stored,
// in order.
func eventsLeft(t *testing.T, db *store.DB, requestIDs []string) []string {
	t.Helper()
	var left []string
	for _, id := range requestIDs {
		_, err := db.EventByRequestID(t.Context(), id)
		switch {
		case err == nil:
			left = append(left, id)
		case !apperr.Is(err, apperr.NotFound):
			t.Fatal(err)
		}
	}
	return left
}

// userAttributesCap: what the bound on users with attributes needs: a
// count of the rows, a replace that adds none, a delete that says
// whether there was a row.
func (s suite) userAttributesCap(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	count := func(want int64) {
		t.Helper()
		if n, err := db.CountUserAttributes(ctx); err != nil || n != want {
			t.Errorf("CountUserAttributes = %d, %v; want %d", n, err, want)
		}
	}
	count(0)
	if ok, err := db.ReplaceUserAttributes(ctx, "u1", json.RawMessage(`{"plan":"pro"}`), t0); err != nil || ok {
		t.Errorf("ReplaceUserAttributes of a user without = %v, %v; want false", ok, err)
	}
	count(0)
	for _, u := range []string{"u1", "u2"} {
		if err := db.PutUserAttributes(ctx, u, json.RawMessage(`{"plan":"free"}`), t0); err != nil {
			t.Fatal(err)
		}
	}
	count(2)
	if ok, err := db.ReplaceUserAttributes(ctx, "u1", json.RawMessage(`{"plan":"pro"}`), t0); err != nil || !ok {
		t.Errorf("ReplaceUserAttributes of a user with = %v, %v; want true", ok, err)
	}
	if a, err := db.UserAttributes(ctx, "u1"); err != nil || string(a) != `{"plan":"pro"}` {
		t.Errorf("UserAttributes after the replace = %s, %v", a, err)
	}
	count(2)
	for _, want := range []bool{true, false} {
		if had, err := db.DeleteUserAttributes(ctx, "u1"); err != nil || had != want {
			t.Errorf("DeleteUserAttributes = %v, %v; want %v", had, err, want)
		}
	}
	count(1)
	if a, err := db.UserAttributes(ctx, "u1"); err != nil || string(a) != `{}` {
		t.Errorf("UserAttributes after the delete = %s, %v; want {}", a, err)
	}
}
