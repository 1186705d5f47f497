package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestWorkflowsInBrowser opens the dashboard's Workflows page: the list
// shows a workflow (a send, a wait for an event with a timeout, a send);
// of two runs an event started for dana, its runs page shows one waiting
// for the awaited event with its deadline; the awaited event for that one
// completes it, seen live with both sends' notifications linked to their
// delivery timelines; the other is canceled with a click (the API then
// has it canceled). The Notifications page shows dana's runs beside her
// notifications, and a run's notification link opens that notification's
// timeline.
func TestWorkflowsInBrowser(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, testConfig(t))
	var k struct {
		Key string `json:"key"`
	}
	apiCall(t, n, "POST", "/v1/keys", "", map[string]any{"name": "dashboard", "scopes": []string{"admin"}}, http.StatusCreated, &k)
	apiCall(t, n, "PUT", "/v1/workflows/cart", k.Key, map[string]any{
		"trigger": map[string]any{"event": "cart.abandoned"},
		"steps": []any{
			map[string]any{"name": "remind", "send": "abandoned_cart"},
			map[string]any{"name": "wait_order", "wait_for": map[string]any{"event": "order.placed", "match": map[string]any{"cart_id": "{cart_id}"}, "timeout": "2h"}},
			map[string]any{"name": "thanks", "send": map[string]any{"type": "order.shipped", "channels": []string{"email"}}},
		}}, http.StatusCreated, nil)
	start := func(cart string) string {
		t.Helper()
		var a client.EventAccepted
		apiCall(t, n, "POST", "/v1/events", k.Key, map[string]any{"name": "cart.abandoned", "user_id": "dana",
			"data": map[string]any{"cart_id": cart, "order": "#" + cart}}, http.StatusAccepted, &a)
		if len(a.RunsStarted) != 1 {
			t.Fatalf("cart.abandoned for %s started %v, want one run", cart, a.RunsStarted)
		}
		return a.RunsStarted[0]
	}
	getRun := func(id string) client.WorkflowRun {
		t.Helper()
		var r client.WorkflowRun
		apiCall(t, n, "GET", "/v1/workflow-runs/"+id, k.Key, nil, http.StatusOK, &r)
		return r
	}
	waitStatus := func(id, want string) client.WorkflowRun {
		t.Helper()
		var r client.WorkflowRun
		enginetest.EventuallyNil(t, 30*time.Second, "run "+id+" "+want, func() error {
			r = getRun(id)
			return enginetest.State(r.Status == want, "%+v", r)
		})
		return r
	}
	buying, leaving := start("c1"), start("c2")
	waitStatus(buying, "waiting")
	waitStatus(leaving, "waiting")

	b.run(t, "sign in", chromedp.Navigate(n.httpURL+"/ui/?poll=300"), chromedp.WaitVisible(chromedp.ID("api-key")),
		chromedp.SetValue(chromedp.ID("api-key"), k.Key), chromedp.Click(chromedp.CSS("#signin button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("nav")))
	b.run(t, "open the Workflows page from the nav", chromedp.Click(chromedp.CSS(`#nav a[href="#/workflows"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#workflows tr[data-key="cart"]`)))
	row := `#workflows tr[data-key="cart"]`
	b.run(t, "see the workflow", waitText(row, "cart.abandoned"), waitText(row, "every event"),
		waitJS(fmt.Sprintf(`document.querySelector(%q).children[4].textContent === "3"`, row)))
	b.screenshot(t, "workflows-01-list")
	b.noErrors(t, "workflows")

	b.run(t, "open its runs", chromedp.Click(chromedp.CSS(row+" a")), chromedp.WaitVisible(chromedp.ID("workflow-steps")),
		waitText("#workflow-steps", "wait_order"), waitText("#workflow-steps", "order.placed"))
	runRow := func(id string) string { return fmt.Sprintf(`#workflow-runs tr[data-id=%q]`, id) }
	b.run(t, "see dana's runs waiting", waitText(runRow(buying), "waiting for order.placed"), waitText(runRow(buying), `cart_id="c1"`),
		waitText(runRow(leaving), "waiting for order.placed"), waitText(runRow(buying), "dana"))
	b.run(t, "open the waiting run's timeline", chromedp.Click(chromedp.CSS(runRow(buying)+" button.open-timeline")),
		chromedp.WaitVisible(chromedp.CSS(`#workflow-runs tr.expand[data-run="`+buying+`"] ol.run-steps`)))
	timeline := `#workflow-runs tr.expand[data-run="` + buying + `"]`
	deadline := getRun(buying).WaitingFor.Until
	if deadline.IsZero() {
		t.Fatalf("run %s waits with no deadline; its wait_for has a 2h timeout", buying)
	}
	b.run(t, "the wait and its deadline on the timeline", waitText(timeline, "#1"), waitText(timeline, "wait_order"),
		waitText(timeline, "waiting for order.placed"), waitText(timeline, " until "),
		waitJS(fmt.Sprintf(`document.querySelector(%q).textContent.includes(%q)`, timeline+" .wait", "until")))
	b.screenshot(t, "workflows-02-waiting")
	b.noErrors(t, "a workflow's runs")

	var resumed client.EventAccepted
	apiCall(t, n, "POST", "/v1/events", k.Key, map[string]any{"name": "order.placed", "user_id": "dana",
		"data": map[string]any{"cart_id": "c1"}}, http.StatusAccepted, &resumed)
	if len(resumed.RunsResumed) != 1 || resumed.RunsResumed[0] != buying {
		t.Fatalf("order.placed for c1 resumed %v, want %s", resumed.RunsResumed, buying)
	}
	done := waitStatus(buying, "completed")
	var sends []string
	for _, s := range done.Steps {
		if s.Kind == "send" && s.NotificationID != "" {
			sends = append(sends, s.NotificationID)
		}
	}
	if len(sends) != 2 {
		t.Fatalf("completed run %s has sends %v, want two notifications", buying, sends)
	}
	link := func(id string) string {
		return fmt.Sprintf(`%s a.notification[href="#/notifications?user=dana&id=%s"]`, timeline, id)
	}
	b.run(t, "see the run completed, both notifications linked", waitJS(fmt.Sprintf(`document.querySelector(%q).dataset.status === "completed"`, runRow(buying))),
		chromedp.WaitVisible(chromedp.CSS(link(sends[0]))), chromedp.WaitVisible(chromedp.CSS(link(sends[1]))),
		waitText(timeline, "thanks"))
	if ok := b.evalBool(t, fmt.Sprintf(`!document.querySelector(%q + " button.cancel-run")`, runRow(buying))); !ok {
		t.Errorf("the completed run %s still offers Cancel", buying)
	}
	b.screenshot(t, "workflows-03-completed")
	b.noErrors(t, "a run completed")

	b.run(t, "cancel the other run", chromedp.Click(chromedp.CSS(runRow(leaving)+" button.cancel-run")),
		waitText(`#workflow-runs tr.expand[data-run="`+leaving+`"] .cancel-outcome`, "Run canceled."),
		waitJS(fmt.Sprintf(`document.querySelector(%q).dataset.status === "canceled"`, runRow(leaving))))
	if r := getRun(leaving); r.Status != "canceled" {
		t.Errorf("after the click, run %s = %s, want canceled", leaving, r.Status)
	}
	b.screenshot(t, "workflows-04-canceled")
	b.noErrors(t, "a run canceled")

	b.run(t, "filter by status", eval(`location.hash = "#/workflows?key=cart&user=dana&status=canceled"`),
		chromedp.WaitVisible(chromedp.CSS(runRow(leaving))),
		waitJS(fmt.Sprintf(`!document.querySelector(%q)`, runRow(buying))))
	b.noErrors(t, "runs filtered")

	showPage(b, t, "notifications?user=dana", "#user-runs")
	panel := func(id string) string { return fmt.Sprintf(`#user-runs tr[data-id=%q]`, id) }
	b.run(t, "dana's runs beside her notifications", waitText("#notifications", sends[0]),
		waitText(panel(buying), "completed"), waitText(panel(leaving), "canceled"), waitText(panel(buying), "cart"))
	b.run(t, "a run's timeline on the Notifications page", chromedp.Click(chromedp.CSS(panel(buying)+" button.open-timeline")),
		chromedp.WaitVisible(chromedp.CSS(`#user-runs tr.expand[data-run="`+buying+`"] a.notification`)))
	b.screenshot(t, "workflows-05-notifications")
	b.noErrors(t, "notifications with runs")
	b.run(t, "follow a send's notification to its timeline",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#user-runs a.notification[href$=%q]`, "id="+sends[1]))),
		chromedp.WaitVisible(chromedp.CSS("#notifications tr.expand ul.timeline")),
		waitText("#notifications", sends[1]), waitText("#notifications tr.expand", "accepted"))
	if ok := b.evalBool(t, fmt.Sprintf(`!document.querySelector("#notifications").textContent.includes(%q)`, sends[0])); !ok {
		t.Errorf("the link to %s opened more than that notification", sends[1])
	}
	b.screenshot(t, "workflows-06-notification")
	b.noErrors(t, "a run's notification")
}
