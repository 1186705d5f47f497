package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestWorkflowsCLI drives `sluice workflows` and `sluice events send`
// against a node: the guide's abandoned cart, saved from a file, started
// by an event, resumed by the order, listed, read and canceled.
func TestWorkflowsCLI(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	env := map[string]string{"SLUICE_SERVER": n.httpURL}
	file := filepath.Join(t.TempDir(), "cart.json")
	def := `{"trigger": {"event": "cart.abandoned"},
	  "steps": [{"name": "reminder", "send": "abandoned_cart"},
	            {"name": "wait_order", "wait_for": {"event": "order.placed", "match": {"cart_id": "{cart_id}"}, "timeout": "1h"}}]}`
	if err := os.WriteFile(file, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, env, args...)
		if code != want {
			t.Fatalf("sluice %s = exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out
	}
	if out := run(0, "workflows", "put", "cart", "--file", file); !strings.Contains(out, "created cart (version 1)") {
		t.Errorf("workflows put = %q", out)
	}
	// What get --json prints is a file put takes again: the same definition, the same version.
	got := run(0, "workflows", "get", "cart", "--json")
	if err := os.WriteFile(file, []byte(got), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := run(0, "workflows", "put", "cart", "--file", file); !strings.Contains(out, "version 1") {
		t.Errorf("workflows put of get's JSON = %q, want version 1 still", out)
	}
	run(2, "workflows", "put", "other", "--file", file) // the file is cart's: refused before any call
	if out := run(0, "workflows", "list"); !strings.Contains(out, "cart.abandoned") {
		t.Errorf("workflows list = %q", out)
	}

	var a client.EventAccepted
	out := run(0, "events", "send", "--name", "cart.abandoned", "--user", "u1", "--data", `{"cart_id":"c1"}`, "--request-id", "c1", "--json")
	if err := json.Unmarshal([]byte(out), &a); err != nil || len(a.RunsStarted) != 1 {
		t.Fatalf("events send --json = %q (%v), want one run started", out, err)
	}
	id := a.RunsStarted[0]
	enginetest.EventuallyNil(t, 30*time.Second, "run waiting", func() error {
		out := run(0, "workflows", "runs", "cart", "--user", "u1", "--status", "waiting")
		return enginetest.State(strings.Contains(out, id) && strings.Contains(out, "order.placed"), "%s", out)
	})
	if out := run(0, "events", "send", "--name", "order.placed", "--user", "u1", "--data", `{"cart_id":"c1"}`); !strings.Contains(out, id) {
		t.Errorf("events send order.placed = %q, want %s resumed", out, id)
	}
	enginetest.EventuallyNil(t, 30*time.Second, "run completed", func() error {
		out := run(0, "workflows", "run", id)
		return enginetest.State(strings.Contains(out, "completed") && strings.Contains(out, "wait_order"), "%s", out)
	})
	run(2, "events", "send", "--name", "x", "--user", "u1", "--data", `[1]`)
	run(2, "workflows", "cancel", "cart") // neither --user nor --run

	out = run(0, "events", "send", "--name", "cart.abandoned", "--user", "u2", "--data", `{"cart_id":"c2"}`, "--json")
	if err := json.Unmarshal([]byte(out), &a); err != nil || len(a.RunsStarted) != 1 {
		t.Fatalf("events send = %q", out)
	}
	if out := run(0, "workflows", "cancel", "cart", "--user", "u2"); !strings.Contains(out, "1 runs canceled") || !strings.Contains(out, a.RunsStarted[0]) {
		t.Errorf("workflows cancel = %q", out)
	}
	if out := run(0, "workflows", "delete", "cart"); !strings.Contains(out, "deleted cart") {
		t.Errorf("workflows delete = %q", out)
	}
	run(1, "workflows", "get", "cart")
}

// TestClientWorkflows drives the workflow calls of package client against
// a node, its exchanges validated against the OpenAPI document.
func TestClientWorkflows(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	ctx := context.Background()
	c := testClient(n.httpURL, "")
	w, created, err := c.PutWorkflow(ctx, "nudge", json.RawMessage(`{"trigger":{"event":"signed_up"},"entry":{"once_per":"24h"},"steps":[{"wait":"1h"},{"send":"flash_sale"}]}`))
	if err != nil || !created || w.Version != 1 || w.Entry == nil || w.Entry.OncePer != "24h" || len(w.Steps) != 2 {
		t.Fatalf("PutWorkflow = %+v, %v, %v", w, created, err)
	}
	if _, _, err := c.PutWorkflow(ctx, "bad", json.RawMessage(`{"trigger":{"event":"x"},"steps":[{"wait":"soon"}]}`)); !fieldRefused(err, 422, "steps[0].wait") {
		t.Errorf("PutWorkflow bad = %v, want 422 naming steps[0].wait", err)
	}
	if ws, err := c.ListWorkflows(ctx); err != nil || len(ws) != 1 || ws[0].Key != "nudge" {
		t.Errorf("ListWorkflows = %+v, %v", ws, err)
	}
	if w, err := c.GetWorkflow(ctx, "nudge"); err != nil || w.Trigger.Event != "signed_up" {
		t.Errorf("GetWorkflow = %+v, %v", w, err)
	}
	a, err := c.SendEvent(ctx, client.Event{RequestID: "s1", Name: "signed_up", UserID: "u1"})
	if err != nil || a.Duplicate || len(a.RunsStarted) != 1 {
		t.Fatalf("SendEvent = %+v, %v", a, err)
	}
	if again, err := c.SendEvent(ctx, client.Event{RequestID: "s1", Name: "signed_up", UserID: "u1"}); err != nil || !again.Duplicate || again.EventID != a.EventID {
		t.Errorf("SendEvent again = %+v, %v; want the first, as a duplicate", again, err)
	}
	res, err := c.SendEvents(ctx, []client.Event{{Name: "signed_up", UserID: "u2"}, {Name: "signed_up"}})
	if err != nil || len(res) != 2 || res[0].Status != "accepted" || res[1].Status != "refused" || res[1].Error == nil || res[1].Error.Status != 422 {
		t.Errorf("SendEvents = %+v, %v", res, err)
	}
	r, err := c.GetWorkflowRun(ctx, a.RunsStarted[0])
	if err != nil || r.UserID != "u1" || r.Workflow != "nudge" {
		t.Errorf("GetWorkflowRun = %+v, %v", r, err)
	}
	runs, _, err := c.ListWorkflowRuns(ctx, client.RunQuery{Workflow: "nudge"})
	if err != nil || len(runs) != 2 {
		t.Errorf("ListWorkflowRuns = %+v, %v; want 2", runs, err)
	}
	runs, _, err = c.ListWorkflowRuns(ctx, client.RunQuery{UserID: "u2"})
	if err != nil || len(runs) != 1 || runs[0].UserID != "u2" {
		t.Errorf("ListWorkflowRuns of u2 = %+v, %v", runs, err)
	}
	ids, err := c.CancelWorkflowRuns(ctx, "nudge", "", a.RunsStarted[0])
	if err != nil || !slices.Equal(ids, a.RunsStarted) {
		t.Errorf("CancelWorkflowRuns = %v, %v", ids, err)
	}
	if canceled, err := c.DeleteWorkflow(ctx, "nudge"); err != nil || canceled != 1 {
		t.Errorf("DeleteWorkflow = %d, %v; want u2's run canceled", canceled, err)
	}
	if _, err := c.GetWorkflow(ctx, "nudge"); !client.IsStatus(err, 404) {
		t.Errorf("GetWorkflow after delete = %v, want 404", err)
	}

	attrs, err := c.PutUserAttributes(ctx, "u1", map[string]any{"plan": "pro"})
	if err != nil || attrs["plan"] != "pro" {
		t.Errorf("PutUserAttributes = %v, %v", attrs, err)
	}
	if attrs, err := c.GetUserAttributes(ctx, "u1"); err != nil || attrs["plan"] != "pro" {
		t.Errorf("GetUserAttributes = %v, %v", attrs, err)
	}
}
