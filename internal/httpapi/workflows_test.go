package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/workflow"
)

// profiles is the workflow engine's view of a user, as the node wires it:
// settings from the notification service, attributes from the store.
type profiles struct {
	*notify.Service
	db *store.DB
}

func (p profiles) UserAttributes(ctx context.Context, user string) (json.RawMessage, error) {
	return p.db.UserAttributes(ctx, user)
}

// setupWorkflows serves the event, workflow and attribute routes over a
// workflow engine on the bundle's SQLite store, its scheduler running
// until the test ends; notifications go to a queue that drops them.
func setupWorkflows(t *testing.T) *bundle {
	t.Helper()
	b := setup(t)
	log := slog.New(slog.DiscardHandler)
	ns := notify.NewService(notify.Options{Store: b.db, Queue: discardQueue{}, Logger: log})
	wf := workflow.New(workflow.Options{Store: b.db, Sender: ns, Templates: ns, Profiles: profiles{ns, b.db}, Logger: log,
		Tick: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wf.RunScheduler(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the workflow scheduler did not stop within 30s")
		}
	})
	b.srv = New(Options{Logger: log, Keys: b.db, Notify: ns, Workflows: wf, Attributes: b.db})
	return b
}

// call makes one request and decodes a JSON answer into out (if not
// nil), failing the test unless the status is want.
func (b *bundle) call(t *testing.T, key, method, path, body string, want int, out any) {
	t.Helper()
	resp := b.do(call{method: method, path: path, body: body, key: key})
	defer resp.Body.Close()
	if resp.StatusCode != want {
		var p Problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		t.Fatalf("%s %s = %d %+v, want %d", method, path, resp.StatusCode, p, want)
	}
	if want >= 400 {
		decodeProblem(t, resp)
		return
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
	}
}

// abandonedCart is the guide's example: a reminder, then the wait for
// the order, with a second reminder when it does not come.
const abandonedCart = `{
  "trigger": {"event": "cart.abandoned"},
  "entry": {"once_per": "24h"},
  "steps": [
    {"name": "remind", "send": "abandoned_cart"},
    {"name": "wait_order", "wait_for": {"event": "order.placed", "match": {"cart_id": "{cart_id}"}, "timeout": "%s"},
     "on_timeout": "last_call"},
    {"exit": true},
    {"name": "last_call", "send": {"type": "abandoned_cart", "channels": ["email"]}}
  ]
}`

type runJSON struct {
	ID         string          `json:"id"`
	Workflow   string          `json:"workflow"`
	Version    int             `json:"version"`
	UserID     string          `json:"user_id"`
	Status     string          `json:"status"`
	Data       json.RawMessage `json:"data"`
	WaitingFor *struct {
		Event string `json:"event"`
	} `json:"waiting_for"`
	Steps []struct {
		Index          int    `json:"index"`
		Name           string `json:"name"`
		Kind           string `json:"kind"`
		Status         string `json:"status"`
		NotificationID string `json:"notification_id"`
		Outcome        string `json:"outcome"`
	} `json:"steps"`
}

// waitRun polls run id until its status is want.
func (b *bundle) waitRun(t *testing.T, key, id, want string) runJSON {
	t.Helper()
	var run runJSON
	enginetest.EventuallyNil(t, 30*time.Second, "run "+id+" "+want, func() error {
		run = runJSON{}
		b.call(t, key, "GET", "/v1/workflow-runs/"+id, "", http.StatusOK, &run)
		return enginetest.State(run.Status == want, "status %s, steps %+v", run.Status, run.Steps)
	})
	return run
}

type eventAnswer struct {
	EventID     string   `json:"event_id"`
	RunsStarted []string `json:"runs_started"`
	RunsResumed []string `json:"runs_resumed"`
}

func TestWorkflowDefinitions(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t)
	admin, reader := b.addKey(t, auth.ScopeAdmin), b.addKey(t, auth.ScopeNotifyRead)
	def := fmt.Sprintf(abandonedCart, "24h")

	var w struct {
		Key     string            `json:"key"`
		Version int               `json:"version"`
		Steps   []json.RawMessage `json:"steps"`
		Trigger struct{ Event string }
	}
	b.call(t, admin, "PUT", "/v1/workflows/cart", def, http.StatusCreated, &w)
	if w.Key != "cart" || w.Version != 1 || len(w.Steps) != 4 || w.Trigger.Event != "cart.abandoned" {
		t.Errorf("PUT new = %+v, want cart version 1 with 4 steps on cart.abandoned", w)
	}
	b.call(t, admin, "PUT", "/v1/workflows/cart", def, http.StatusOK, &w)
	if w.Version != 1 {
		t.Errorf("PUT the same again: version %d, want 1 still", w.Version)
	}
	b.call(t, admin, "PUT", "/v1/workflows/cart", fmt.Sprintf(abandonedCart, "48h"), http.StatusOK, &w)
	if w.Version != 2 {
		t.Errorf("PUT a change: version %d, want 2", w.Version)
	}
	b.call(t, reader, "GET", "/v1/workflows/cart", "", http.StatusOK, &w)
	if w.Version != 2 {
		t.Errorf("GET: version %d, want 2", w.Version)
	}
	var list struct {
		Items []struct{ Key string } `json:"items"`
	}
	b.call(t, reader, "GET", "/v1/workflows", "", http.StatusOK, &list)
	if len(list.Items) != 1 || list.Items[0].Key != "cart" {
		t.Errorf("GET /v1/workflows = %+v, want cart alone", list.Items)
	}

	bad := `{"trigger": {"event": "cart.abandoned"}, "steps": [{"wait_for": {"event": "order.placed", "timeout": "soon"}}, {"bogus": 1}]}`
	resp := b.do(call{method: "PUT", path: "/v1/workflows/bad", body: bad, key: admin})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("PUT invalid = %d, want 422", resp.StatusCode)
	}
	p := decodeProblem(t, resp)
	var fields []string
	for _, f := range p.Errors {
		fields = append(fields, f.Field)
	}
	if !slices.Contains(fields, "steps[0].wait_for.timeout") || !slices.ContainsFunc(fields, func(f string) bool { return strings.HasPrefix(f, "steps[1]") }) {
		t.Errorf("422 fields = %q, want steps[0].wait_for.timeout and steps[1]", fields)
	}
	b.call(t, admin, "PUT", "/v1/workflows/bad", `[1]`, http.StatusBadRequest, nil)
	b.call(t, reader, "GET", "/v1/workflows/nope", "", http.StatusNotFound, nil)
	b.call(t, reader, "PUT", "/v1/workflows/cart", def, http.StatusForbidden, nil)

	var del struct {
		Key          string `json:"key"`
		RunsCanceled int    `json:"runs_canceled"`
	}
	b.call(t, admin, "DELETE", "/v1/workflows/cart", "", http.StatusOK, &del)
	if del.Key != "cart" || del.RunsCanceled != 0 {
		t.Errorf("DELETE = %+v, want cart with no runs canceled", del)
	}
	b.call(t, reader, "GET", "/v1/workflows/cart", "", http.StatusNotFound, nil)
	b.call(t, admin, "DELETE", "/v1/workflows/cart", "", http.StatusNotFound, nil)
}

// TestAbandonedCart walks the guide's example over HTTP: the event starts
// a run that sends and waits; the matching order resumes it to the end;
// without one, the timeout sends the last call.
func TestAbandonedCart(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t)
	key := b.addKey(t, auth.ScopeAdmin)
	b.call(t, key, "PUT", "/v1/workflows/cart", fmt.Sprintf(abandonedCart, "1h"), http.StatusCreated, nil)

	var a eventAnswer
	b.call(t, key, "POST", "/v1/events", `{"request_id":"cart-c1","name":"cart.abandoned","user_id":"u1","data":{"cart_id":"c1"}}`,
		http.StatusAccepted, &a)
	if a.EventID == "" || len(a.RunsStarted) != 1 || len(a.RunsResumed) != 0 {
		t.Fatalf("cart.abandoned = %+v, want one run started", a)
	}
	id := a.RunsStarted[0]
	run := b.waitRun(t, key, id, "waiting")
	if run.Workflow != "cart" || run.UserID != "u1" || run.WaitingFor == nil || run.WaitingFor.Event != "order.placed" ||
		len(run.Steps) < 2 || run.Steps[0].Kind != "send" || run.Steps[0].NotificationID == "" {
		t.Errorf("waiting run = %+v, want it sent and waiting for order.placed", run)
	}

	// The same request again: the first answer; another body: 409.
	var again eventAnswer
	b.call(t, key, "POST", "/v1/events", `{"request_id":"cart-c1","name":"cart.abandoned","user_id":"u1","data":{"cart_id":"c1"}}`,
		http.StatusOK, &again)
	if again.EventID != a.EventID || !slices.Equal(again.RunsStarted, a.RunsStarted) {
		t.Errorf("repeat = %+v, want the first answer %+v", again, a)
	}
	b.call(t, key, "POST", "/v1/events", `{"request_id":"cart-c1","name":"cart.abandoned","user_id":"u1","data":{"cart_id":"c2"}}`,
		http.StatusConflict, nil)

	// Another cart's order does not match; this cart's resumes the run.
	b.call(t, key, "POST", "/v1/events", `{"name":"order.placed","user_id":"u1","data":{"cart_id":"c9"}}`, http.StatusAccepted, &a)
	if len(a.RunsResumed) != 0 {
		t.Errorf("order of another cart resumed %v", a.RunsResumed)
	}
	b.call(t, key, "POST", "/v1/events", `{"name":"order.placed","user_id":"u1","data":{"cart_id":"c1","total":30}}`, http.StatusAccepted, &a)
	if !slices.Equal(a.RunsResumed, []string{id}) {
		t.Fatalf("order.placed resumed %v, want [%s]", a.RunsResumed, id)
	}
	run = b.waitRun(t, key, id, "completed")
	if !strings.Contains(string(run.Data), `"order.placed"`) {
		t.Errorf("completed run's data = %s, want the order under order.placed", run.Data)
	}

	// No order: the timeout sends the last call. (A new version: runs
	// started on the first keep its hour.)
	b.call(t, key, "PUT", "/v1/workflows/cart", fmt.Sprintf(abandonedCart, "1s"), http.StatusOK, nil)
	b.call(t, key, "POST", "/v1/events", `{"name":"cart.abandoned","user_id":"u2","data":{"cart_id":"c2"}}`, http.StatusAccepted, &a)
	if len(a.RunsStarted) != 1 {
		t.Fatalf("cart.abandoned of u2 = %+v, want one run", a)
	}
	run = b.waitRun(t, key, a.RunsStarted[0], "completed")
	if last := run.Steps[len(run.Steps)-1]; last.Name != "last_call" || last.NotificationID == "" {
		t.Errorf("timed-out run's last step = %+v, want the last_call send", last)
	}

	// once_per: u1 entered within 24h, so a second cart starts nothing.
	b.call(t, key, "POST", "/v1/events", `{"name":"cart.abandoned","user_id":"u1","data":{"cart_id":"c3"}}`, http.StatusAccepted, &a)
	if len(a.RunsStarted) != 0 {
		t.Errorf("second cart within once_per started %v", a.RunsStarted)
	}

	// Runs by workflow and by user, narrowed by status.
	var page struct {
		Items      []runJSON `json:"items"`
		NextCursor string    `json:"next_cursor"`
	}
	b.call(t, key, "GET", "/v1/workflows/cart/runs?status=completed&limit=1", "", http.StatusOK, &page)
	if len(page.Items) != 1 || page.NextCursor == "" {
		t.Errorf("first page of completed runs = %d items, cursor %q; want 1 and a cursor", len(page.Items), page.NextCursor)
	}
	b.call(t, key, "GET", "/v1/workflows/cart/runs?user_id=u2", "", http.StatusOK, &page)
	if len(page.Items) != 1 || page.Items[0].UserID != "u2" {
		t.Errorf("u2's runs = %+v", page.Items)
	}
	b.call(t, key, "GET", "/v1/users/u1/workflow-runs", "", http.StatusOK, &page)
	if len(page.Items) != 1 || page.Items[0].ID != id {
		t.Errorf("u1's runs = %+v, want %s", page.Items, id)
	}
	b.call(t, key, "GET", "/v1/workflows/cart/runs?status=done", "", http.StatusBadRequest, nil)
	b.call(t, key, "GET", "/v1/workflow-runs/run_nope", "", http.StatusNotFound, nil)
}

func TestCancelWorkflowRuns(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t)
	key := b.addKey(t, auth.ScopeAdmin)
	b.call(t, key, "PUT", "/v1/workflows/nudge", `{"trigger":{"event":"signed_up"},"steps":[{"wait":"1h"},{"send":"flash_sale"}]}`,
		http.StatusCreated, nil)
	var ids []string
	for _, u := range []string{"u1", "u1", "u2"} {
		var a eventAnswer
		b.call(t, key, "POST", "/v1/events", `{"name":"signed_up","user_id":"`+u+`"}`, http.StatusAccepted, &a)
		ids = append(ids, a.RunsStarted...)
	}
	if len(ids) != 3 {
		t.Fatalf("runs started: %v, want 3", ids)
	}
	var out struct {
		Canceled []string `json:"canceled"`
	}
	b.call(t, key, "POST", "/v1/workflows/nudge/cancel", `{"user_id":"u1"}`, http.StatusOK, &out)
	if got := slices.Sorted(slices.Values(out.Canceled)); !slices.Equal(got, slices.Sorted(slices.Values(ids[:2]))) {
		t.Errorf("canceled %v, want u1's %v", out.Canceled, ids[:2])
	}
	b.call(t, key, "POST", "/v1/workflows/nudge/cancel", `{"run_id":"`+ids[2]+`"}`, http.StatusOK, &out)
	if !slices.Equal(out.Canceled, ids[2:]) {
		t.Errorf("canceled %v, want %v", out.Canceled, ids[2:])
	}
	b.call(t, key, "POST", "/v1/workflows/nudge/cancel", `{"user_id":"u1"}`, http.StatusOK, &out)
	if len(out.Canceled) != 0 {
		t.Errorf("canceling again canceled %v", out.Canceled)
	}
	b.waitRun(t, key, ids[0], "canceled")
	b.call(t, key, "POST", "/v1/workflows/nudge/cancel", `{}`, http.StatusUnprocessableEntity, nil)

	// Deleting the workflow cancels its live runs.
	var a eventAnswer
	b.call(t, key, "POST", "/v1/events", `{"name":"signed_up","user_id":"u3"}`, http.StatusAccepted, &a)
	var del struct {
		RunsCanceled int `json:"runs_canceled"`
	}
	b.call(t, key, "DELETE", "/v1/workflows/nudge", "", http.StatusOK, &del)
	if del.RunsCanceled != 1 {
		t.Errorf("DELETE canceled %d runs, want 1", del.RunsCanceled)
	}
}

func TestEventBatch(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t)
	key := b.addKey(t, auth.ScopeNotifySend, auth.ScopeAdmin)
	b.call(t, key, "PUT", "/v1/workflows/nudge", `{"trigger":{"event":"signed_up"},"steps":[{"wait":"1h"}]}`, http.StatusCreated, nil)
	var out struct {
		Results []struct {
			EventID     string   `json:"event_id"`
			RunsStarted []string `json:"runs_started"`
			Status      string   `json:"status"`
			Error       *Problem `json:"error"`
		} `json:"results"`
		Accepted, Duplicates, Refused int
	}
	body := `{"events":[{"request_id":"e1","name":"signed_up","user_id":"u1"},{"name":"","user_id":"u2"},` +
		`{"request_id":"e1","name":"signed_up","user_id":"u1"}]}`
	b.call(t, key, "POST", "/v1/events/batch", body, http.StatusOK, &out)
	if len(out.Results) != 3 || out.Accepted != 1 || out.Refused != 1 || out.Duplicates != 1 {
		t.Fatalf("batch = %+v, want accepted, refused, duplicate", out)
	}
	r := out.Results
	if r[0].Status != "accepted" || len(r[0].RunsStarted) != 1 || r[1].Status != "refused" || r[1].Error == nil ||
		r[1].Error.Status != 422 || r[2].Status != "duplicate" || r[2].EventID != r[0].EventID {
		t.Errorf("results = %+v", r)
	}
	b.call(t, key, "POST", "/v1/events/batch", `{"events":[]}`, http.StatusUnprocessableEntity, nil)
	b.call(t, key, "POST", "/v1/events", `{"name":"signed_up"}`, http.StatusUnprocessableEntity, nil)
	b.call(t, key, "POST", "/v1/events", `{"name":"signed_up","user_id":"u1","data":[1]}`, http.StatusUnprocessableEntity, nil)
}

func TestUserAttributes(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t)
	send, read := b.addKey(t, auth.ScopeNotifySend), b.addKey(t, auth.ScopeNotifyRead)
	var got map[string]any
	b.call(t, read, "GET", "/v1/users/u1/attributes", "", http.StatusOK, &got)
	if len(got) != 0 {
		t.Errorf("no attributes = %v, want {}", got)
	}
	b.call(t, send, "PUT", "/v1/users/u1/attributes", `{"plan": "pro", "orders": 3, "vip": true}`, http.StatusOK, &got)
	b.call(t, read, "GET", "/v1/users/u1/attributes", "", http.StatusOK, &got)
	if got["plan"] != "pro" || got["orders"] != float64(3) || got["vip"] != true {
		t.Errorf("attributes = %v", got)
	}
	b.call(t, send, "PUT", "/v1/users/u1/attributes", `["pro"]`, http.StatusBadRequest, nil)
	b.call(t, send, "PUT", "/v1/users/u1/attributes", `null`, http.StatusBadRequest, nil)
	b.call(t, send, "PUT", "/v1/users/u1/attributes", `{"notes":"`+strings.Repeat("x", MaxAttributeBytes)+`"}`, http.StatusUnprocessableEntity, nil)
	b.call(t, read, "PUT", "/v1/users/u1/attributes", `{}`, http.StatusForbidden, nil)
}

// TestWorkflowsNotConfigured: without the engine, its routes answer 503.
func TestWorkflowsNotConfigured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []call{{method: "POST", path: "/v1/events", body: `{"name":"x","user_id":"u"}`},
		{method: "GET", path: "/v1/workflows"}, {method: "GET", path: "/v1/users/u1/attributes"}} {
		if resp := b.do(c); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s %s = %d, want 503", c.method, c.path, resp.StatusCode)
		} else {
			decodeProblem(t, resp)
		}
	}
}
