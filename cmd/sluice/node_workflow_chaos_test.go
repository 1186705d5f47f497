package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// chaosWorkflow is the flow under test: a send, a pause, a wait for the
// user's go event (matched on the run's k) that either resumes into the
// second send or times out into the late one.
const chaosWorkflow = `{"trigger": {"event": "chaos.start"}, "steps": [
  {"name": "first", "send": {"type": "order.shipped", "channels": ["email"]}},
  {"name": "pause", "wait": "1s"},
  {"name": "await", "wait_for": {"event": "chaos.go", "match": {"k": "{k}"}, "timeout": "15s"}, "on_timeout": "late"},
  {"name": "second", "send": {"type": "order.shipped", "channels": ["email"]}},
  {"exit": true},
  {"name": "late", "send": {"type": "order.shipped", "channels": ["email"]}}
]}`

// The two paths a run of chaosWorkflow may take, by step name.
var (
	chaosResumed  = []string{"first", "pause", "await", "second", ""} // "" is the unnamed exit
	chaosTimedOut = []string{"first", "pause", "await", "late"}
)

// chaosRun is a run as GET /v1/workflows/{key}/runs shows it.
type chaosRun struct {
	ID     string `json:"id"`
	UserID string `json:"user_id"`
	Status string `json:"status"`
	Steps  []struct {
		Index          int    `json:"index"`
		Name           string `json:"name"`
		Kind           string `json:"kind"`
		Status         string `json:"status"`
		NotificationID string `json:"notification_id"`
		Outcome        string `json:"outcome"`
	} `json:"steps"`
	WaitingFor *struct {
		Event string `json:"event"`
	} `json:"waiting_for"`
}

// TestWorkflowRunsSurviveKill: two `sluice serve` processes on one
// private PostgreSQL and NATS run a four-step workflow for 200 users; one
// node is killed with SIGKILL while it holds runs (in the middle of the
// start events, some of them posted to it), and started again later.
// Events whose POST failed are posted again to the survivor with the same
// request_id. Every run ends, and the history checker finds no run lost,
// none started twice, no step run twice and none out of order; every send
// step's notification exists once, with the step's request_id.
func TestWorkflowRunsSurviveKill(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	pg, nats := enginetest.StartPostgres(t), enginetest.StartNATSCluster(t, 1)
	flags := []string{"--database-url", pg.URL(), "--nats-url", nats.URL(), "--workflow-lease", "2s"}
	dirA, dirB := t.TempDir(), t.TempDir()
	var a, b *otpNode
	var wg sync.WaitGroup
	wg.Go(func() { a = startOTPNode(t, dirA, flags) })
	wg.Go(func() { b = startOTPNode(t, dirB, flags) })
	wg.Wait()
	if a == nil || b == nil {
		t.FailNow()
	}
	if code, resp := b.do(t, "PUT", "/v1/workflows/chaos", chaosWorkflow); code != 201 {
		t.Fatalf("PUT workflow = %d %s", code, resp)
	}

	const users = 200
	// post sends an event to n and, when that fails (n was killed), the
	// same event again to the survivor: the request_id makes it once.
	post := func(n *otpNode, name string, u int) error {
		body := fmt.Sprintf(`{"request_id":"%s-u%d","name":%q,"user_id":"u%d","data":{"k":"u%d","order":"#%d"}}`, name, u, name, u, u, u)
		code, resp, err := n.try("POST", "/v1/events", body)
		if err != nil || code >= 500 {
			code, resp, err = b.try("POST", "/v1/events", body)
		}
		if err != nil || (code != 202 && code != 200) {
			return fmt.Errorf("POST %s for u%d = %d %s %v", name, u, code, resp, err)
		}
		return nil
	}
	errs := make(chan error, users)
	var posting sync.WaitGroup
	var stepsOnA float64
	for u := range users {
		if u == users/2 { // half the starts in: A holds runs (its own events' and claimed ones)
			posting.Wait()
			stepsOnA = a.metric("sluice_workflow_steps_total")
			a.kill()
		}
		n := b
		if u < users/2 && u%2 == 0 {
			n = a
		}
		posting.Go(func() { errs <- post(n, "chaos.start", u) })
		if u%8 == 7 {
			posting.Wait() // a few in flight at a time
		}
	}
	posting.Wait()
	a = startOTPNode(t, dirA, flags)
	if a == nil {
		t.FailNow()
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	// The even users' go events, each once its run waits for it, posted
	// alternately to both nodes.
	sentGo := map[string]bool{}
	enginetest.EventuallyNil(t, 90*time.Second, "every even user's run waiting for chaos.go, and its event posted", func() error {
		waiting := 0
		for _, r := range chaosRuns(t, b, "status=waiting") {
			if r.WaitingFor == nil || r.WaitingFor.Event != "chaos.go" || sentGo[r.UserID] {
				continue
			}
			var u int
			if _, err := fmt.Sscanf(r.UserID, "u%d", &u); err != nil || u%2 != 0 {
				continue
			}
			if err := post([]*otpNode{a, b}[u%4/2], "chaos.go", u); err != nil {
				return err
			}
			sentGo[r.UserID] = true
			waiting++
		}
		return enginetest.State(len(sentGo) == users/2, "%d of %d go events posted", len(sentGo), users/2)
	})

	var runs []chaosRun
	enginetest.EventuallyNil(t, 90*time.Second, "every run ended", func() error {
		runs = chaosRuns(t, b, "")
		live := 0
		for _, r := range runs {
			if r.Status == "running" || r.Status == "waiting" {
				live++
			}
		}
		return enginetest.State(len(runs) >= users && live == 0, "%d runs, %d still live", len(runs), live)
	})
	problems, resumed := checkRunHistory(runs, users)
	for _, p := range problems {
		t.Error(p)
	}
	// Each send step's notification: one, with the step's request_id.
	for _, r := range runs {
		for _, s := range r.Steps {
			if s.Kind != "send" {
				continue
			}
			code, resp := b.do(t, "GET", "/v1/notifications/"+s.NotificationID, "")
			var n struct {
				RequestID string `json:"request_id"`
				UserID    string `json:"user_id"`
			}
			_ = json.Unmarshal(resp, &n)
			if want := fmt.Sprintf("wf:%s:%d", r.ID, s.Index); code != 200 || n.RequestID != want || n.UserID != r.UserID {
				t.Errorf("run %s step %d: notification %s = %d %s, want %s for %s", r.ID, s.Index, s.NotificationID, code, resp, want, r.UserID)
			}
		}
	}
	if resumed != users/2 {
		t.Errorf("%d runs resumed by their event, want the %d even users' (each event was posted while its run waited, 15 s before its timeout)", resumed, users/2)
	}
	if stepsOnA == 0 {
		t.Errorf("the killed node had run no step: the kill tested nothing")
	}
	t.Logf("workflow runs across a SIGKILL: %d users, %d runs ended (the killed node had run %v steps), %d resumed by their event, %d timed out; %d problems",
		users, len(runs), stepsOnA, resumed, len(runs)-resumed, len(problems))
}

// chaosRuns lists every run of the chaos workflow, following the cursor.
func chaosRuns(t *testing.T, n *otpNode, filter string) []chaosRun {
	t.Helper()
	var all []chaosRun
	cursor := ""
	for {
		code, resp := n.do(t, "GET", "/v1/workflows/chaos/runs?limit=100&"+filter+"&cursor="+url.QueryEscape(cursor), "")
		var page struct {
			Items      []chaosRun `json:"items"`
			NextCursor string     `json:"next_cursor"`
		}
		if code != 200 || json.Unmarshal(resp, &page) != nil {
			t.Fatalf("list runs = %d %s", code, resp)
		}
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// checkRunHistory is the history checker: each of users u0.. has exactly
// one run (none lost, none started twice); each run completed along one of
// the workflow's two paths, every step in order and once, each ended
// (completed) with its outcome; each send step names a notification, no
// two steps the same one. It returns the problems and how many runs took
// the resumed path.
func checkRunHistory(runs []chaosRun, users int) (problems []string, resumed int) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	byUser := map[string][]chaosRun{}
	for _, r := range runs {
		byUser[r.UserID] = append(byUser[r.UserID], r)
	}
	for u := range users {
		switch rs := byUser[fmt.Sprintf("u%d", u)]; len(rs) {
		case 0:
			bad("lost: u%d has no run", u)
		case 1:
		default:
			bad("duplicated: u%d has %d runs", u, len(rs))
		}
	}
	notifications := map[string]string{}
	for _, r := range runs {
		if r.Status != "completed" {
			bad("run %s of %s ended %s, want completed", r.ID, r.UserID, r.Status)
		}
		names := make([]string, len(r.Steps))
		for i, s := range r.Steps {
			names[i] = s.Name
			if s.Status != "completed" {
				bad("run %s step %d (%s) is %s (%s), want completed", r.ID, s.Index, s.Name, s.Status, s.Outcome)
			}
			if s.Kind == "send" {
				if s.NotificationID == "" {
					bad("run %s step %d (%s) sent no notification", r.ID, s.Index, s.Name)
				} else if other, dup := notifications[s.NotificationID]; dup {
					bad("duplicated: notification %s is both %s and run %s step %d", s.NotificationID, other, r.ID, s.Index)
				}
				notifications[s.NotificationID] = fmt.Sprintf("run %s step %d", r.ID, s.Index)
			}
		}
		switch {
		case slices.Equal(names, chaosResumed):
			resumed++
		case slices.Equal(names, chaosTimedOut):
		default:
			bad("out of order or repeated: run %s of %s ran [%s], want [%s] or [%s]", r.ID, r.UserID,
				strings.Join(names, " "), strings.Join(chaosResumed, " "), strings.Join(chaosTimedOut, " "))
		}
	}
	return problems, resumed
}
