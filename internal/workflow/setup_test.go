package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
	"github.com/sluicehq/sluice/internal/workflow"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// nopQueue takes the notifications' jobs and drops them: these tests look
// at the notifications a workflow makes, not at their delivery.
type nopQueue struct{}

func (nopQueue) Publish(context.Context, notify.Job) error { return nil }

// sender is the Sender: it sends through the real notify.Service and
// records each request, after answering the errors scripted first.
type sender struct {
	next workflow.Sender
	mu   sync.Mutex
	errs []error
	reqs []notify.Request
}

func (s *sender) Send(ctx context.Context, req notify.Request) (notify.Accepted, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	var err error
	if len(s.errs) > 0 {
		err, s.errs = s.errs[0], s.errs[1:]
	}
	s.mu.Unlock()
	if err != nil {
		return notify.Accepted{}, err
	}
	return s.next.Send(ctx, req)
}

func (s *sender) script(errs ...error) { s.mu.Lock(); s.errs = errs; s.mu.Unlock() }

// requests returns the request ids sent so far, in order.
func (s *sender) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, len(s.reqs))
	for i, r := range s.reqs {
		ids[i] = r.RequestID
	}
	return ids
}

// profiles reads settings from notify and attributes from the store.
type profiles struct {
	n  *notify.Service
	db *store.DB
}

func (p profiles) Settings(ctx context.Context, user string) (notify.Settings, error) {
	return p.n.Settings(ctx, user)
}

func (p profiles) UserAttributes(ctx context.Context, user string) (json.RawMessage, error) {
	return p.db.UserAttributes(ctx, user)
}

// metrics records the hooks' calls as lines.
type metrics struct {
	mu    sync.Mutex
	lines []string
}

func (m *metrics) add(format string, args ...any) {
	m.mu.Lock()
	m.lines = append(m.lines, fmt.Sprintf(format, args...))
	m.mu.Unlock()
}

func (m *metrics) count(line string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, l := range m.lines {
		if l == line {
			n++
		}
	}
	return n
}

func (m *metrics) hooks() workflow.Metrics {
	return workflow.Metrics{
		RunStarted: func(wf string) { m.add("started %s", wf) },
		RunEnded:   func(wf string, st workflow.Status) { m.add("ended %s %s", wf, st) },
		StepEnded:  func(wf, step, kind, status string) { m.add("step %s %s %s %s", wf, step, kind, status) },
		Resumed:    func(wf, by string, late time.Duration) { m.add("resumed %s %s %s", wf, by, late) },
	}
}

type bundle struct {
	db      *store.DB
	clock   *ratelimittest.Clock
	notify  *notify.Service
	sender  *sender
	metrics *metrics
	opts    workflow.Options
	svc     *workflow.Service
}

// t0 is the tests' start time, whole seconds (the store keeps microseconds).
var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// setup builds a Service on a fresh SQLite store, sending through a real
// notify.Service, on a clock that moves only when told.
func setup(t *testing.T, mod func(*workflow.Options)) *bundle {
	t.Helper()
	return setupOn(t, storetest.SQLite(t), mod)
}

// engines runs test on SQLite and on PostgreSQL (skipped without
// SLUICE_TEST_POSTGRES_URL), each with its own bundle.
func engines(t *testing.T, mod func(*workflow.Options), test func(t *testing.T, b *bundle)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, setup(t, mod))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
		db, err := store.Open(t.Context(), store.Options{URL: url, MaxOpenConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if _, err := db.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		test(t, setupOn(t, db, mod))
	})
}

func setupOn(t *testing.T, db *store.DB, mod func(*workflow.Options)) *bundle {
	t.Helper()
	b := &bundle{db: db, clock: ratelimittest.NewClock(t0), metrics: &metrics{}}
	b.notify = notify.NewService(notify.Options{Store: b.db, Queue: nopQueue{}, Now: b.clock.Now,
		Providers: map[notify.Channel]notify.Provider{}})
	b.sender = &sender{next: b.notify}
	b.opts = workflow.Options{Store: b.db, Sender: b.sender, Templates: b.notify, Profiles: profiles{b.notify, b.db},
		Metrics: b.metrics.hooks(), Now: b.clock.Now, Rand: func() float64 { return 0 }}
	if mod != nil {
		mod(&b.opts)
	}
	b.svc = workflow.New(b.opts)
	return b
}

func (b *bundle) put(t *testing.T, key, body string) workflow.Workflow {
	t.Helper()
	w, _, err := b.svc.PutWorkflow(t.Context(), key, json.RawMessage(body))
	if err != nil {
		t.Fatalf("PutWorkflow(%s): %v %v", key, err, fieldsOf(err))
	}
	return w
}

func (b *bundle) ingest(t *testing.T, name, user, data string) workflow.Accepted {
	t.Helper()
	a, err := b.svc.Ingest(t.Context(), workflow.EventRequest{Name: name, UserID: user, Data: json.RawMessage(data)})
	if err != nil {
		t.Fatalf("Ingest(%s, %s): %v", name, user, err)
	}
	return a
}

// due advances every due run, as the scheduler would.
func (b *bundle) due(t *testing.T) int {
	t.Helper()
	n, err := b.svc.RunDue(t.Context())
	if err != nil {
		t.Fatalf("RunDue: %v", err)
	}
	return n
}

func (b *bundle) run(t *testing.T, id string) workflow.RunView {
	t.Helper()
	v, err := b.svc.Run(t.Context(), id)
	if err != nil {
		t.Fatalf("Run(%s): %v", id, err)
	}
	return v
}

// at checks a run's status and the kind and status of its last step.
func (b *bundle) at(t *testing.T, id string, status workflow.Status, kind, stepStatus string) workflow.RunView {
	t.Helper()
	v := b.run(t, id)
	last := workflow.StepRecord{}
	if n := len(v.Steps); n > 0 {
		last = v.Steps[n-1]
	}
	if v.Status != status || last.Kind != kind || last.Status != stepStatus {
		t.Fatalf("run %s is %s at %s %s, want %s at %s %s; steps %+v", id, v.Status, last.Kind, last.Status, status, kind, stepStatus, v.Steps)
	}
	return v
}

// notification returns the notification saved for a request id.
func (b *bundle) notification(t *testing.T, requestID string) notify.Notification {
	t.Helper()
	n, err := b.db.NotificationByRequestID(t.Context(), requestID)
	if err != nil {
		t.Fatalf("notification %s: %v", requestID, err)
	}
	return n
}

// notifications counts the user's notifications.
func (b *bundle) notifications(t *testing.T, user string) int {
	t.Helper()
	recs, err := b.db.UserNotifications(t.Context(), user, t0.Add(-time.Hour), notify.Cursor{}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

func one(t *testing.T, ids []string) string {
	t.Helper()
	if len(ids) != 1 {
		t.Fatalf("ids = %v, want one", ids)
	}
	return ids[0]
}

// newRand returns a seeded source of [0, 1) for Options.Rand, safe for
// concurrent use.
func newRand(seed uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}
