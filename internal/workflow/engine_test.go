package workflow_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/workflow"
)

// TestAbandonedCartTimesOut: the cart abandoned, an hour's pause, no
// order within a day: the reminder goes out by email with the cart's
// data, request_id wf:<run>:<index>, and the run completes.
func TestAbandonedCartTimesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.put(t, "cart", abandonedCart)
	a := b.ingest(t, "cart.abandoned", "u1", `{"cart_id":"c1","items":"2 shoes"}`)
	id := one(t, a.RunsStarted)
	if len(a.RunsResumed) != 0 || a.EventID == "" {
		t.Fatalf("answer %+v", a)
	}
	b.due(t)
	v := b.at(t, id, workflow.StatusWaiting, "wait", "waiting")
	if v.WaitingFor == nil || !v.WaitingFor.Until.Equal(t0.Add(time.Hour)) {
		t.Fatalf("waiting_for = %+v, want until %v", v.WaitingFor, t0.Add(time.Hour))
	}
	b.clock.Advance(59 * time.Minute)
	if n := b.due(t); n != 0 {
		t.Fatalf("%d runs advanced before the hour", n)
	}
	b.clock.Advance(time.Minute)
	b.due(t)
	v = b.at(t, id, workflow.StatusWaiting, "wait_for", "waiting")
	if v.WaitingFor.Event != "order.placed" || string(v.WaitingFor.Match) != `{"cart_id":"c1"}` || !v.WaitingFor.Until.Equal(t0.Add(25*time.Hour)) {
		t.Fatalf("waiting_for = %+v %s", v.WaitingFor, v.WaitingFor.Match)
	}
	b.clock.Advance(24 * time.Hour)
	b.due(t)
	v = b.at(t, id, workflow.StatusCompleted, "send", "completed")
	n := b.notification(t, "wf:"+id+":5")
	if n.Type != "abandoned_cart" || !slices.Equal(n.Channels, []notify.Channel{notify.Email}) || n.UserID != "u1" || !strings.Contains(string(n.Data), `"items":"2 shoes"`) {
		t.Errorf("notification %+v", n)
	}
	if got := v.Steps[len(v.Steps)-1].NotificationID; got != n.ID {
		t.Errorf("step notification_id = %q, want %q", got, n.ID)
	}
	wantSteps := []string{"pause:wait:completed:waited", "await:wait_for:completed:timed out", "remind:send:completed:"}
	var got []string
	for _, s := range v.Steps {
		got = append(got, fmt.Sprintf("%s:%s:%s:%s", s.Name, s.Kind, s.Status, s.Outcome))
	}
	if !slices.Equal(got, wantSteps) {
		t.Errorf("steps = %q, want %q", got, wantSteps)
	}
	if b.metrics.count("started cart") != 1 || b.metrics.count("ended cart completed") != 1 ||
		b.metrics.count("step cart remind send completed") != 1 || b.metrics.count("resumed cart deadline 0s") != 2 {
		t.Errorf("metrics: %q", b.metrics.lines)
	}
}

// TestAbandonedCartResumes: the order placed resumes the run waiting for
// its cart (not for another cart, nor another user's), the event's data
// joins the run's under its name, and the branch on it picks the path.
func TestAbandonedCartResumes(t *testing.T) {
	t.Parallel()
	engines(t, nil, abandonedCartResumes)
}

func abandonedCartResumes(t *testing.T, b *bundle) {
	b.put(t, "cart", abandonedCart)
	id := one(t, b.ingest(t, "cart.abandoned", "u1", `{"cart_id":"c1"}`).RunsStarted)
	other := one(t, b.ingest(t, "cart.abandoned", "u2", `{"cart_id":"c1"}`).RunsStarted)
	b.due(t)
	if a := b.ingest(t, "order.placed", "u1", `{"cart_id":"c1","total":150}`); len(a.RunsResumed) != 0 {
		t.Fatalf("a run at its pause was resumed: %+v", a)
	}
	b.clock.Advance(time.Hour)
	b.due(t)
	if a := b.ingest(t, "order.placed", "u1", `{"cart_id":"c2","total":150}`); len(a.RunsResumed) != 0 {
		t.Fatalf("another cart's order resumed the run: %+v", a)
	}
	b.clock.Advance(time.Minute)
	a := b.ingest(t, "order.placed", "u1", `{"cart_id":"c1","total":150}`)
	if one(t, a.RunsResumed) != id {
		t.Fatalf("resumed %v, want %s", a.RunsResumed, id)
	}
	b.at(t, other, workflow.StatusWaiting, "wait_for", "waiting")
	v := b.at(t, id, workflow.StatusRunning, "wait_for", "completed")
	if v.Steps[len(v.Steps)-1].Outcome != "event "+a.EventID {
		t.Errorf("outcome %q", v.Steps[len(v.Steps)-1].Outcome)
	}
	b.clock.Advance(time.Second)
	b.due(t)
	v = b.at(t, id, workflow.StatusCompleted, "exit", "completed") // thanks, then done
	var data map[string]any
	if err := json.Unmarshal(v.Data, &data); err != nil || data["order.placed"].(map[string]any)["total"] != 150.0 {
		t.Errorf("run data %s", v.Data)
	}
	if n := b.notification(t, "wf:"+id+":3"); n.Type != "order.confirmed" {
		t.Errorf("sent %s, want order.confirmed (the branch's path)", n.Type)
	}
	if b.metrics.count("resumed cart event 1s") != 1 {
		t.Errorf("metrics: %q", b.metrics.lines)
	}
	// A small order takes the else path: exit, no notification.
	id2 := one(t, b.ingest(t, "cart.abandoned", "u3", `{"cart_id":"c9"}`).RunsStarted)
	b.due(t)
	b.clock.Advance(time.Hour)
	b.due(t)
	one(t, b.ingest(t, "order.placed", "u3", `{"cart_id":"c9","total":"20"}`).RunsResumed)
	b.due(t)
	b.at(t, id2, workflow.StatusCompleted, "exit", "completed")
	if n := b.notifications(t, "u3"); n != 0 {
		t.Errorf("u3 got %d notifications, want none", n)
	}
}

// TestOncePer: a second entry within entry.once_per starts nothing; one
// after it does.
func TestOncePer(t *testing.T) {
	t.Parallel()
	engines(t, nil, oncePer)
}

func oncePer(t *testing.T, b *bundle) {
	b.put(t, "cart", abandonedCart)
	one(t, b.ingest(t, "cart.abandoned", "u1", `{"cart_id":"c1"}`).RunsStarted)
	b.clock.Advance(23 * time.Hour)
	if a := b.ingest(t, "cart.abandoned", "u1", `{"cart_id":"c2"}`); len(a.RunsStarted) != 0 {
		t.Fatalf("entered twice within once_per: %+v", a)
	}
	one(t, b.ingest(t, "cart.abandoned", "u2", `{"cart_id":"c3"}`).RunsStarted)
	b.clock.Advance(time.Hour + time.Second)
	one(t, b.ingest(t, "cart.abandoned", "u1", `{"cart_id":"c4"}`).RunsStarted)
}

// TestIngestIdempotent: a request_id again answers the first answer and
// starts nothing; with another body it is Conflict.
func TestIngestIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.put(t, "w", `{"trigger":{"event":"signup"},"steps":[{"wait":"1h"}]}`)
	req := workflow.EventRequest{RequestID: "r1", Name: "signup", UserID: "u1", Data: json.RawMessage(`{"a":1,"b":2}`)}
	first, err := b.svc.Ingest(t.Context(), req)
	if err != nil || first.Duplicate || len(first.RunsStarted) != 1 {
		t.Fatalf("first: %+v %v", first, err)
	}
	req.Data = json.RawMessage(`{ "b": 2, "a": 1 }`)
	again, err := b.svc.Ingest(t.Context(), req)
	if err != nil || !again.Duplicate || again.EventID != first.EventID || !slices.Equal(again.RunsStarted, first.RunsStarted) {
		t.Fatalf("again: %+v %v, want the first answer %+v", again, err, first)
	}
	req.Data = json.RawMessage(`{"a":2}`)
	if _, err := b.svc.Ingest(t.Context(), req); !apperr.Is(err, apperr.Conflict) {
		t.Fatalf("other body: %v, want Conflict", err)
	}
	runs, _, err := b.svc.Runs(t.Context(), workflow.RunFilter{Workflow: "w"}, "", 10)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %d %v, want 1", len(runs), err)
	}
}

func TestIngestInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, tt := range []struct {
		name  string
		req   workflow.EventRequest
		field string
	}{
		{"no name", workflow.EventRequest{UserID: "u"}, "name"},
		{"bad name", workflow.EventRequest{Name: "a b", UserID: "u"}, "name"},
		{"no user", workflow.EventRequest{Name: "a"}, "user_id"},
		{"system user", workflow.EventRequest{Name: "a", UserID: notify.SystemUserPrefix + "x"}, "user_id"},
		{"data not an object", workflow.EventRequest{Name: "a", UserID: "u", Data: json.RawMessage(`[1]`)}, "data"},
		{"data too big", workflow.EventRequest{Name: "a", UserID: "u", Data: json.RawMessage(`{"a":"` + strings.Repeat("x", 32<<10) + `"}`)}, "data"},
		{"request_id too long", workflow.EventRequest{Name: "a", UserID: "u", RequestID: strings.Repeat("r", 256)}, "request_id"},
	} {
		_, err := b.svc.Ingest(t.Context(), tt.req)
		if f := fieldsOf(err); !apperr.Is(err, apperr.Unprocessable) || !slices.Equal(f, []string{tt.field}) {
			t.Errorf("%s: %v %q, want Unprocessable on %s", tt.name, err, f, tt.field)
		}
	}
}

// TestIngestBatch: each event answered in order; a refused one carries
// its error and the others go on.
func TestIngestBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.put(t, "w", `{"trigger":{"event":"signup"},"steps":[{"wait":"1h"}]}`)
	res, err := b.svc.IngestBatch(t.Context(), []workflow.EventRequest{
		{Name: "signup", UserID: "u1"}, {Name: "bad name", UserID: "u2"}, {Name: "signup", UserID: "u3"},
	})
	if err != nil || len(res) != 3 {
		t.Fatalf("IngestBatch: %v %v", res, err)
	}
	if len(res[0].RunsStarted) != 1 || res[0].Error != nil || res[1].Error == nil || res[1].Error.Code != apperr.Unprocessable || len(res[2].RunsStarted) != 1 {
		t.Errorf("answers %+v", res)
	}
	if _, err := b.svc.IngestBatch(t.Context(), make([]workflow.EventRequest, workflow.MaxBatch+1)); !apperr.Is(err, apperr.Unprocessable) {
		t.Errorf("oversized batch: %v", err)
	}
}

// TestLiveRunsCap: a user at MaxLiveRunsPerUser starts no more runs.
func TestLiveRunsCap(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *workflow.Options) { o.MaxLiveRunsPerUser = 2 })
	b.put(t, "w", `{"trigger":{"event":"signup"},"steps":[{"wait":"1h"}]}`)
	one(t, b.ingest(t, "signup", "u1", `{}`).RunsStarted)
	one(t, b.ingest(t, "signup", "u1", `{}`).RunsStarted)
	if a := b.ingest(t, "signup", "u1", `{}`); len(a.RunsStarted) != 0 {
		t.Fatalf("a third live run started: %+v", a)
	}
	one(t, b.ingest(t, "signup", "u2", `{}`).RunsStarted)
}

// TestSplitSeeded: a seeded Rand splits 200 runs about 70/30 between a
// send and a holdout that exits without sending.
func TestSplitSeeded(t *testing.T) {
	t.Parallel()
	rng := newRand(7)
	b := setup(t, func(o *workflow.Options) { o.Rand = rng })
	b.put(t, "ab", `{"trigger":{"event":"e"},"steps":[{"split":[{"percent":70,"goto":"s"},{"percent":30,"goto":"exit"}]},{"name":"s","send":"flash_sale"}]}`)
	var ids []string
	for i := range 200 {
		ids = append(ids, one(t, b.ingest(t, "e", fmt.Sprintf("u%d", i), `{}`).RunsStarted))
	}
	b.due(t)
	sent, held := 0, 0
	for _, id := range ids {
		v := b.run(t, id)
		if v.Status != workflow.StatusCompleted {
			t.Fatalf("run %s is %s", id, v.Status)
		}
		switch v.Steps[len(v.Steps)-1].Kind {
		case "send":
			sent++
		case "split":
			held++
			if o := v.Steps[0].Outcome; o != "path 2: exit" {
				t.Fatalf("holdout outcome %q", o)
			}
		}
	}
	if sent+held != 200 || sent < 120 || sent > 160 {
		t.Errorf("sent %d, held out %d; want about 140/60", sent, held)
	}
	if n := len(b.sender.requests()); n != sent {
		t.Errorf("%d sends for %d runs on the send path", n, sent)
	}
}

// TestUntilLocal: a wait until 09:00 ends at the next 09:00 in the
// user's time zone.
func TestUntilLocal(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if _, err := b.notify.PutSettings(t.Context(), "ny", notify.Settings{Timezone: "America/New_York"}); err != nil {
		t.Fatal(err)
	}
	b.put(t, "w", `{"trigger":{"event":"e"},"steps":[{"wait":{"until_local":"09:00"}},{"send":"flash_sale"}]}`)
	ny := one(t, b.ingest(t, "e", "ny", `{}`).RunsStarted)
	utc := one(t, b.ingest(t, "e", "nobody", `{}`).RunsStarted)
	b.due(t)
	// t0 is 12:00 UTC, 08:00 in New York (EDT): 09:00 there is 13:00 UTC
	// today; for a user without a time zone 09:00 UTC is tomorrow.
	if v := b.run(t, ny); !v.WaitingFor.Until.Equal(t0.Add(time.Hour)) {
		t.Errorf("New York until %v, want %v", v.WaitingFor.Until, t0.Add(time.Hour))
	}
	if v := b.run(t, utc); !v.WaitingFor.Until.Equal(t0.Add(21 * time.Hour)) {
		t.Errorf("UTC until %v, want %v", v.WaitingFor.Until, t0.Add(21*time.Hour))
	}
	b.clock.Advance(time.Hour)
	b.due(t)
	b.at(t, ny, workflow.StatusCompleted, "send", "completed")
	b.at(t, utc, workflow.StatusWaiting, "wait", "waiting")
}

// TestBranchOnUserAttributes: user.<attribute> reads the user's stored
// attributes.
func TestBranchOnUserAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := b.db.PutUserAttributes(t.Context(), "pro", json.RawMessage(`{"plan":"pro","address":{"country":"DE"}}`), t0); err != nil {
		t.Fatal(err)
	}
	b.put(t, "w", `{"trigger":{"event":"e"},"steps":[
		{"branch":[{"if":{"user.plan":{"in":["pro","team"]}},"goto":"de"}],"else":"free"},
		{"name":"de","branch":[{"if":{"user.address.country":{"eq":"DE"}},"goto":"sale"}]},
		{"name":"free","exit":true},
		{"name":"sale","send":"flash_sale"}]}`)
	pro := one(t, b.ingest(t, "e", "pro", `{}`).RunsStarted)
	free := one(t, b.ingest(t, "e", "free", `{}`).RunsStarted)
	b.due(t)
	b.at(t, pro, workflow.StatusCompleted, "send", "completed")
	b.at(t, free, workflow.StatusCompleted, "exit", "completed")
}
