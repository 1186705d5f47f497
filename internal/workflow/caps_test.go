package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/internal/workflow"
)

// waitsForever starts runs that wait for an event without a deadline:
// live until canceled.
const waitsForever = `{"trigger":{"event":"signup"},"steps":[{"wait_for":{"event":"never"}}]}`

// tooMany checks err is TooMany naming setting.
func tooMany(t *testing.T, err error, setting string) {
	t.Helper()
	if !apperr.Is(err, apperr.TooMany) || !strings.Contains(err.Error(), setting) {
		t.Fatalf("err = %v, want TooMany naming %s", err, setting)
	}
}

// TestMaxLiveRuns: past MaxLiveRuns live runs an event that would start
// one is refused (TooMany naming the setting), in a batch too, while an
// event that starts nothing is taken; a run ending makes room; another
// node counting the store refuses as well.
func TestMaxLiveRuns(t *testing.T) {
	t.Parallel()
	const maxRuns = 4
	b := setup(t, func(o *workflow.Options) { o.MaxLiveRuns = maxRuns })
	ctx := t.Context()
	b.put(t, "forever", waitsForever)
	var ids []string
	for i := range maxRuns {
		ids = append(ids, one(t, b.ingest(t, "signup", fmt.Sprintf("u%d", i), `{}`).RunsStarted))
	}
	b.due(t)
	_, err := b.svc.Ingest(ctx, workflow.EventRequest{Name: "signup", UserID: "u9"})
	tooMany(t, err, "notify.workflows.max_live_runs")
	if a := b.ingest(t, "page.viewed", "u9", `{}`); len(a.RunsStarted) != 0 {
		t.Errorf("an event starting nothing: %+v", a)
	}
	res, err := b.svc.IngestBatch(ctx, []workflow.EventRequest{{Name: "signup", UserID: "u9"}, {Name: "page.viewed", UserID: "u9"}})
	if err != nil || len(res) != 2 || res[0].Error == nil || res[0].Error.Code != apperr.TooMany || res[1].Error != nil {
		t.Fatalf("batch at the cap = %+v, %v; want the start refused (429), the other taken", res, err)
	}
	if err := b.svc.CountNow(ctx); err != nil || b.svc.LiveRuns() != maxRuns {
		t.Fatalf("counted %d live runs (%v), want %d", b.svc.LiveRuns(), err, maxRuns)
	}
	if _, err := b.svc.Cancel(ctx, "forever", "", ids[0]); err != nil {
		t.Fatal(err)
	}
	one(t, b.ingest(t, "signup", "u9", `{}`).RunsStarted)
	_, err = b.svc.Ingest(ctx, workflow.EventRequest{Name: "signup", UserID: "u10"})
	tooMany(t, err, "notify.workflows.max_live_runs")

	other := workflow.New(b.opts) // another node on the same store
	if err := other.CountNow(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = other.Ingest(ctx, workflow.EventRequest{Name: "signup", UserID: "u11"})
	tooMany(t, err, "notify.workflows.max_live_runs")
	counts, err := other.RunCounts(ctx)
	if err != nil || counts["forever"][workflow.StatusWaiting] != maxRuns-1 || counts["forever"][workflow.StatusRunning] != 1 {
		t.Errorf("RunCounts = %v, %v; want %d waiting and 1 running", counts, err, maxRuns-1)
	}
}

// TestMaxAttributeUsers: past MaxAttributeUsers users with attributes, a
// new user's are refused (TooMany naming the setting); a user with some
// may replace them; {} deletes them and makes room.
func TestMaxAttributeUsers(t *testing.T) {
	t.Parallel()
	const maxUsers = 3
	b := setup(t, func(o *workflow.Options) {
		o.MaxAttributeUsers, o.Attributes = maxUsers, o.Store.(workflow.AttributeStore)
	})
	ctx := t.Context()
	put := func(user, attrs string) error {
		return b.svc.PutUserAttributes(ctx, user, json.RawMessage(attrs), t0)
	}
	for i := range maxUsers {
		if err := put(fmt.Sprintf("u%d", i), `{"plan":"free"}`); err != nil {
			t.Fatal(err)
		}
	}
	tooMany(t, put("u9", `{"plan":"free"}`), "notify.workflows.max_attribute_users")
	if err := put("u0", `{"plan":"pro"}`); err != nil {
		t.Fatalf("replacing at the cap: %v", err)
	}
	if a, err := b.svc.UserAttributes(ctx, "u0"); err != nil || string(a) != `{"plan":"pro"}` {
		t.Errorf("UserAttributes = %s, %v", a, err)
	}
	if err := b.svc.CountNow(ctx); err != nil {
		t.Fatal(err)
	}
	tooMany(t, put("u9", `{"plan":"free"}`), "notify.workflows.max_attribute_users")
	if err := put("u1", `{}`); err != nil {
		t.Fatal(err)
	}
	if n, err := b.db.CountUserAttributes(ctx); err != nil || n != maxUsers-1 {
		t.Errorf("rows after {} = %d, %v; want %d", n, err, maxUsers-1)
	}
	if err := put("u9", `{"plan":"free"}`); err != nil {
		t.Fatalf("a new user once one was deleted: %v", err)
	}
	tooMany(t, put("u10", `{"plan":"free"}`), "notify.workflows.max_attribute_users")
}

// TestPurge: events and ended runs past Retention are deleted, live runs
// never; runs are kept as long as a workflow's once_per reads them.
func TestPurge(t *testing.T) {
	t.Parallel()
	engines(t, func(o *workflow.Options) { o.Retention = 48 * time.Hour }, purge)
}

func purge(t *testing.T, b *bundle) {
	ctx := t.Context()
	b.put(t, "quick", `{"trigger":{"event":"signup"},"steps":[{"exit":true}]}`)
	b.put(t, "forever", waitsForever)
	for _, u := range []string{"u1", "u2"} {
		a, err := b.svc.Ingest(ctx, workflow.EventRequest{Name: "signup", UserID: u, RequestID: "old-" + u})
		if err != nil || len(a.RunsStarted) != 2 {
			t.Fatalf("Ingest = %+v, %v", a, err)
		}
	}
	b.due(t)
	if _, err := b.svc.Cancel(ctx, "forever", "u2", ""); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(47 * time.Hour)
	if _, err := b.svc.Ingest(ctx, workflow.EventRequest{Name: "page.viewed", UserID: "u1", RequestID: "new"}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Hour)
	p, err := b.svc.Purge(ctx, 1)
	if err != nil || p != (workflow.Purged{Events: 2, Runs: 3}) {
		t.Fatalf("Purge = %+v, %v; want 2 events and 3 runs (two completed, one canceled)", p, err)
	}
	all, _, err := b.svc.Runs(ctx, workflow.RunFilter{}, "", 100)
	if err != nil || len(all) != 1 || all[0].Status != workflow.StatusWaiting || all[0].UserID != "u1" {
		t.Fatalf("runs left %+v, %v; want u1's live run alone", all, err)
	}
	live := all[0].ID
	if a, err := b.svc.Ingest(ctx, workflow.EventRequest{Name: "page.viewed", UserID: "u1", RequestID: "new"}); err != nil || !a.Duplicate {
		t.Errorf("the event within the retention again = %+v, %v; want its first answer", a, err)
	}
	if a, err := b.svc.Ingest(ctx, workflow.EventRequest{Name: "page.viewed", UserID: "u9", RequestID: "old-u1"}); err != nil || a.Duplicate {
		t.Errorf("a purged event's request_id again = %+v, %v; want a new event", a, err)
	}

	// once_per reads a user's past runs: they are kept that long.
	b.put(t, "once", `{"trigger":{"event":"order"},"entry":{"once_per":"30d"},"steps":[{"exit":true}]}`)
	one(t, b.ingest(t, "order", "u1", `{}`).RunsStarted)
	b.due(t)
	b.clock.Advance(29 * 24 * time.Hour)
	if p, err := b.svc.Purge(ctx, 0); err != nil || p.Runs != 0 {
		t.Fatalf("Purge within once_per = %+v, %v; want no run", p, err)
	}
	if a := b.ingest(t, "order", "u1", `{}`); len(a.RunsStarted) != 0 {
		t.Fatalf("once_per forgot the run: %+v", a)
	}
	b.clock.Advance(2 * 24 * time.Hour)
	if p, err := b.svc.Purge(ctx, 0); err != nil || p.Runs != 1 {
		t.Fatalf("Purge past once_per = %+v, %v; want 1 run", p, err)
	}
	if v := b.run(t, live); v.Status != workflow.StatusWaiting {
		t.Errorf("the live run is %s after the purges, want waiting", v.Status)
	}
}

// panicky panics sending to user "boom", as a bug in a step would.
type panicky struct{ next workflow.Sender }

func (p panicky) Send(ctx context.Context, req notify.Request) (notify.Accepted, error) {
	if req.UserID == "boom" {
		panic("boom")
	}
	return p.next.Send(ctx, req)
}

// TestAdvancePanicFailsTheRun: a step that panics fails its run with an
// outcome that says so, is counted on the workflow surface, and the
// scheduler goes on advancing the other runs.
func TestAdvancePanicFailsTheRun(t *testing.T) {
	t.Parallel()
	var counted atomic.Int32
	b := setup(t, func(o *workflow.Options) {
		o.Sender = panicky{o.Sender}
		o.Tick = 10 * time.Millisecond
		o.Panics = &panics.Reporter{Logger: slog.New(slog.DiscardHandler), Count: func(surface string) {
			if surface == panics.Workflow {
				counted.Add(1)
			}
		}}
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.svc.RunScheduler(ctx) }()
	b.put(t, "hello", `{"trigger":{"event":"signup"},"steps":[{"name":"hi","send":"otp"},{"exit":true}]}`)
	boom := one(t, b.ingest(t, "signup", "boom", `{"code":"1"}`).RunsStarted)
	fine := one(t, b.ingest(t, "signup", "fine", `{"code":"1"}`).RunsStarted)
	ended := func(id string, want workflow.Status) workflow.RunView {
		t.Helper()
		var v workflow.RunView
		enginetest.EventuallyNil(t, 30*time.Second, "run "+id+" "+string(want), func() error {
			v = b.run(t, id)
			return enginetest.State(v.Status == want, "status %s, steps %+v", v.Status, v.Steps)
		})
		return v
	}
	v := ended(boom, workflow.StatusFailed)
	if last := v.Steps[len(v.Steps)-1]; last.Kind != "send" || last.Status != "failed" || !strings.Contains(last.Outcome, "panicked") {
		t.Errorf("the failed step = %+v, want the send failed with an outcome naming the panic", last)
	}
	ended(fine, workflow.StatusCompleted)
	ended(one(t, b.ingest(t, "signup", "later", `{"code":"1"}`).RunsStarted), workflow.StatusCompleted)
	if n := counted.Load(); n != 1 {
		t.Errorf("%d panics counted on the workflow surface, want 1", n)
	}
	if b.metrics.count("ended hello failed") != 1 {
		t.Errorf("metrics: %q", b.metrics.lines)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunScheduler = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunScheduler did not return within 30s of its context's end")
	}
}

// TestRunDataBound: an awaited event that would take a run's data past
// MaxRunDataBytes fails the run, saying why, instead of resuming it.
func TestRunDataBound(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.put(t, "collect", `{"trigger":{"event":"a"},"steps":[{"wait_for":{"event":"b"}},{"wait_for":{"event":"c"}},{"send":"otp"}]}`)
	pad := `{"pad":"` + strings.Repeat("x", 30_000) + `"}`
	id := one(t, b.ingest(t, "a", "u1", pad).RunsStarted)
	b.due(t)
	if a := b.ingest(t, "b", "u1", pad); len(a.RunsResumed) != 1 {
		t.Fatalf("b = %+v, want the run resumed", a)
	}
	b.due(t)
	if a := b.ingest(t, "c", "u1", pad); len(a.RunsResumed) != 1 {
		t.Fatalf("c = %+v, want the run moved", a)
	}
	v := b.at(t, id, workflow.StatusFailed, "wait_for", "failed")
	if out := v.Steps[len(v.Steps)-1].Outcome; !strings.Contains(out, fmt.Sprint(workflow.MaxRunDataBytes)) {
		t.Errorf("outcome %q, want the bound named", out)
	}
	if len(v.Data) > workflow.MaxRunDataBytes {
		t.Errorf("the run's data grew to %d bytes", len(v.Data))
	}
	if b.metrics.count("ended collect failed") != 1 {
		t.Errorf("metrics: %q", b.metrics.lines)
	}
	if n := b.due(t); n != 0 {
		t.Errorf("%d runs advanced after the failure", n)
	}
}

// TestEventDataRefused: data that is not valid UTF-8 or nests past
// MaxDataDepth is refused, naming the field.
func TestEventDataRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	nest := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, tt := range []struct {
		name, data string
		ok         bool
	}{
		{"invalid UTF-8 in a value", "{\"k\":\"\xff\xfe\"}", false},
		{"invalid UTF-8 in a key", "{\"\xc3\":1}", false},
		{"escaped control characters", `{"k\u0000":"\u0000\u001b"}`, true},
		{"nested to the bound", nest(workflow.MaxDataDepth), true},
		{"nested past it", nest(workflow.MaxDataDepth + 1), false},
		{"arrays past it", `{"a":` + strings.Repeat("[", workflow.MaxDataDepth) + strings.Repeat("]", workflow.MaxDataDepth) + `}`, false},
		{"brackets in strings", `{"a":"` + strings.Repeat("[{", 100) + `"}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.svc.Ingest(t.Context(), workflow.EventRequest{Name: "x", UserID: "u1", Data: json.RawMessage(tt.data)})
			if tt.ok != (err == nil) {
				t.Fatalf("Ingest = %v, want ok %v", err, tt.ok)
			}
			if err != nil && (!apperr.Is(err, apperr.Unprocessable) || fmt.Sprint(fieldsOf(err)) != "[data]") {
				t.Errorf("Ingest = %v %v, want 422 on data", err, fieldsOf(err))
			}
		})
	}
}

// TestPurgeVersions: the versions a later one replaced are deleted past
// Retention unless a live run is on them; a deleted workflow's go, and its
// key with them; MaxVersions bounds the versions of one workflow kept.
func TestPurgeVersions(t *testing.T) {
	t.Parallel()
	engines(t, func(o *workflow.Options) { o.Retention = 48 * time.Hour }, purgeVersions)
}

func purgeVersions(t *testing.T, b *bundle) {
	ctx := t.Context()
	b.svc.SetMaxVersions(3)
	def := func(event string) string {
		return `{"trigger":{"event":"` + event + `"},"steps":[{"wait_for":{"event":"never"}}]}`
	}
	b.put(t, "v", def("a"))
	live := one(t, b.ingest(t, "a", "u1", `{}`).RunsStarted) // on version 1
	b.put(t, "v", def("b"))
	b.put(t, "v", def("c"))
	if _, _, err := b.svc.PutWorkflow(ctx, "v", json.RawMessage(def("d"))); !apperr.Is(err, apperr.TooMany) {
		t.Fatalf("a fourth version = %v, want TooMany", err)
	}
	b.put(t, "gone", def("g"))
	if _, err := b.svc.DeleteWorkflow(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if p, err := b.svc.Purge(ctx, 0); err != nil || p.Versions != 0 {
		t.Fatalf("Purge within the retention = %+v, %v; want no version", p, err)
	}
	b.clock.Advance(49 * time.Hour)
	if p, err := b.svc.Purge(ctx, 0); err != nil || p.Versions != 2 {
		t.Fatalf("Purge = %+v, %v; want 2 versions (v's second, gone's)", p, err)
	}
	for _, v := range []int{1, 3} {
		if _, err := b.db.WorkflowVersion(ctx, "v", v); err != nil {
			t.Errorf("version %d: %v, want it kept", v, err)
		}
	}
	if _, err := b.db.WorkflowVersion(ctx, "v", 2); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("version 2: %v, want it deleted", err)
	}
	b.put(t, "v", def("d")) // room again
	if w := b.put(t, "gone", def("g")); w.Version != 1 {
		t.Errorf("a deleted key put again numbers from %d, want 1 (its row went with its versions)", w.Version)
	}
	if _, err := b.svc.Cancel(ctx, "v", "", live); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(49 * time.Hour)
	if p, err := b.svc.Purge(ctx, 0); err != nil || p.Versions != 2 {
		t.Fatalf("Purge once the run ended = %+v, %v; want v's first and third", p, err)
	}
	if w, err := b.svc.Workflow(ctx, "v"); err != nil || w.Version != 4 || w.Trigger.Event != "d" {
		t.Errorf("the current version = %+v, %v; want version 4 kept", w, err)
	}
}
