package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/events"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// recorder is the Notifier: it keeps the system notifications asked for
// (the pipeline behind it is tested end to end in cmd/sluice).
type recorder struct {
	mu   sync.Mutex
	reqs []notify.SystemRequest
}

func (r *recorder) SendSystem(_ context.Context, req notify.SystemRequest) (notify.Accepted, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return notify.Accepted{NotificationID: "ntf_x"}, nil
}

type bundle struct {
	svc   *events.Service
	db    *store.DB
	sent  *recorder
	clock *time.Time
}

func setup(t *testing.T, o events.Options) bundle {
	t.Helper()
	db, err := store.Open(t.Context(), store.Options{DataDir: filepath.Join(t.TempDir(), "data")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := bundle{db: db, sent: &recorder{}, clock: &now}
	o.Store, o.Notifier, o.Now = db, b.sent, func() time.Time { return *b.clock }
	b.svc = events.NewService(o)
	return b
}

func TestCreateValidates(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Options{})
	neg := -1
	tests := []struct {
		name  string
		sub   events.NewSubscription
		field string
	}{
		{"no url", events.NewSubscription{Events: []string{events.DeliverySent}}, "url"},
		{"ftp", events.NewSubscription{URL: "ftp://x.example", Events: []string{events.DeliverySent}}, "url"},
		{"loopback", events.NewSubscription{URL: "http://127.0.0.1:8080/x", Events: []string{events.DeliverySent}}, "url"},
		{"private", events.NewSubscription{URL: "https://10.0.0.8/x", Events: []string{events.DeliverySent}}, "url"},
		{"metadata", events.NewSubscription{URL: "http://169.254.169.254/latest", Events: []string{events.DeliverySent}}, "url"},
		{"localhost", events.NewSubscription{URL: "http://localhost/x", Events: []string{events.DeliverySent}}, "url"},
		{"no events", events.NewSubscription{URL: "https://x.example"}, "events"},
		{"unknown event", events.NewSubscription{URL: "https://x.example", Events: []string{"delivery.lost"}}, "events[0]"},
		{"twice", events.NewSubscription{URL: "https://x.example", Events: []string{events.DeliverySent, events.DeliverySent}}, "events[1]"},
		{"negative failures", events.NewSubscription{URL: "https://x.example", Events: []string{events.DeliverySent}, DisableAfterFailures: &neg}, "disable_after_failures"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.svc.Create(t.Context(), tt.sub)
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Code != apperr.Unprocessable || len(ae.Fields) == 0 || ae.Fields[0].Field != tt.field {
				t.Errorf("Create(%+v) = %v, want 422 naming %s", tt.sub, err, tt.field)
			}
		})
	}
}

// failing is a Poster that fails every post temporarily.
type failing struct{ calls int }

func (f *failing) Post(context.Context, string, string, string, []byte) error {
	f.calls++
	return notify.Temporary(errors.New("webhook answered 500 Internal Server Error"), 0)
}

func TestDisabledAfterAFailureRunOfDisableAfter(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	counted, disabled := map[string]int{}, 0
	b := setup(t, events.Options{DisableAfter: 5 * 24 * time.Hour,
		Counted:  func(t, r string) { mu.Lock(); counted[t+"/"+r]++; mu.Unlock() },
		Disabled: func() { mu.Lock(); disabled++; mu.Unlock() }})
	ctx := t.Context()
	sub, err := b.svc.Create(ctx, events.NewSubscription{URL: "https://hooks.example.com/x", Events: []string{events.DeliverySent}})
	if err != nil || sub.DisableAfter != 5*24*time.Hour || !strings.HasPrefix(sub.Secret, "whsec_") {
		t.Fatalf("Create = %+v, %v", sub, err)
	}
	p := &failing{}
	sender := events.NewSender(b.svc, p)
	msg := notify.Message{UserID: notify.SystemUserPrefix + sub.ID, Data: json.RawMessage(`{"id":"evt_1","type":"delivery.sent"}`)}
	// Failing for 4 days and 23 hours keeps it enabled...
	for range 3 {
		if _, err := sender.Send(ctx, msg); err == nil {
			t.Fatal("Send succeeded through a failing poster")
		}
		*b.clock = b.clock.Add(59*time.Hour + 30*time.Minute)
	}
	got, _ := b.svc.Subscription(ctx, sub.ID)
	if !got.DisabledAt.IsZero() || got.Failures != 3 {
		t.Fatalf("after 3 failures over 119 hours: %+v, want enabled with 3 failures", got)
	}
	// ...the first failure at or past 5 days disables it.
	*b.clock = b.clock.Add(time.Hour)
	_, _ = sender.Send(ctx, msg)
	got, _ = b.svc.Subscription(ctx, sub.ID)
	if got.DisabledAt.IsZero() || !strings.Contains(got.DisabledReason, "disable_after 120h0m0s") {
		t.Fatalf("after 5 days of failures: %+v, want disabled naming disable_after", got)
	}
	// A disabled subscription is not called; its deliveries fail for good.
	_, err = sender.Send(ctx, msg)
	var se *notify.SendError
	if !errors.As(err, &se) || !se.Permanent || p.calls != 4 {
		t.Errorf("Send to a disabled subscription = %v after %d posts, want permanent with no post", err, p.calls)
	}
	// Events it wants are still logged while disabled (for recover), but
	// not queued to it.
	b.svc.OnStatus(ctx, notify.StatusEvent{Type: notify.EventDeliverySent, NotificationID: "ntf_1", UserID: "u1", Status: notify.StatusSent, At: *b.clock})
	logged, _ := b.db.EventsSince(ctx, b.clock.Add(-time.Minute), "", 10)
	if len(logged) != 1 || len(b.sent.reqs) != 0 {
		t.Errorf("while disabled: %d logged, %d queued; want 1 logged, none queued", len(logged), len(b.sent.reqs))
	}
	mu.Lock()
	if disabled != 1 || counted["delivery.sent/logged"] != 1 || len(counted) != 1 {
		t.Errorf("metrics: %d disabled, counted %v; want 1 disabled and one delivery.sent logged", disabled, counted)
	}
	mu.Unlock()
	rec, err := b.svc.Recover(ctx, sub.ID, b.clock.Add(-time.Minute))
	if err != nil || rec.Queued != 1 || len(b.sent.reqs) != 1 || b.sent.reqs[0].Recipient != sub.ID {
		t.Fatalf("Recover = %+v, %v; queued %+v", rec, err, b.sent.reqs)
	}
	if got, _ := b.svc.Subscription(ctx, sub.ID); !got.DisabledAt.IsZero() || got.Failures != 0 {
		t.Errorf("after Recover: %+v, want enabled, run cleared", got)
	}
	// A second recover queues it again under another request id (the
	// webhook-id, the event id, stays).
	if _, err := b.svc.Recover(ctx, sub.ID, b.clock.Add(-time.Minute)); err != nil || len(b.sent.reqs) != 2 ||
		b.sent.reqs[0].RequestID == b.sent.reqs[1].RequestID || string(b.sent.reqs[0].Data) != string(b.sent.reqs[1].Data) {
		t.Errorf("second Recover queued %+v, %v", b.sent.reqs, err)
	}
	if _, err := b.svc.Recover(ctx, sub.ID, b.clock.Add(-8*24*time.Hour)); !apperr.Is(err, apperr.Unprocessable) {
		t.Errorf("Recover before the retention = %v, want 422", err)
	}
}

func TestNothingLoggedWithoutSubscribers(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Options{})
	ctx := t.Context()
	if _, err := b.svc.Create(ctx, events.NewSubscription{URL: "https://hooks.example.com/x", Events: []string{events.LinkClicked}}); err != nil {
		t.Fatal(err)
	}
	b.svc.OnStatus(ctx, notify.StatusEvent{Type: notify.EventDeliveryFailed, NotificationID: "ntf_1", UserID: "u1", At: *b.clock})
	b.svc.OnClicks(ctx, []shorten.Click{{LinkID: 1, Code: "bot", Bot: true, At: *b.clock}, {LinkID: 2, Code: "abc", At: *b.clock}})
	logged, _ := b.db.EventsSince(ctx, b.clock.Add(-time.Minute), "", 10)
	if len(logged) != 1 || logged[0].Type != events.LinkClicked || !strings.Contains(string(logged[0].Data), `"code":"abc"`) {
		t.Fatalf("logged %+v, want the human click only (nobody wants delivery.failed)", logged)
	}
	if len(b.sent.reqs) != 1 || !strings.Contains(string(b.sent.reqs[0].Data), `"id":"`+logged[0].ID+`"`) {
		t.Errorf("queued %+v, want one message carrying the event id", b.sent.reqs)
	}
}

// BenchmarkOnStatusUnsubscribed is what every status change costs while
// no subscription asks for its type: the hook on the worker's path.
func BenchmarkOnStatusUnsubscribed(b *testing.B) {
	db, err := store.Open(b.Context(), store.Options{DataDir: filepath.Join(b.TempDir(), "data")})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	svc := events.NewService(events.Options{Store: db, Notifier: &recorder{}})
	e := notify.StatusEvent{Type: notify.EventDeliverySent, NotificationID: "ntf_1", UserID: "u1", Status: notify.StatusSent, At: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		svc.OnStatus(b.Context(), e)
	}
}

// BenchmarkOnStatusOneSubscriber is an event one subscription wants: the
// event-log write on SQLite and the payload, the notifier being a
// recorder (the notification it queues costs what any send does).
func BenchmarkOnStatusOneSubscriber(b *testing.B) {
	db, err := store.Open(b.Context(), store.Options{DataDir: filepath.Join(b.TempDir(), "data")})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(b.Context()); err != nil {
		b.Fatal(err)
	}
	svc := events.NewService(events.Options{Store: db, Notifier: &recorder{}})
	if _, err := svc.Create(b.Context(), events.NewSubscription{URL: "https://hooks.example.com/x", Events: []string{events.DeliverySent}}); err != nil {
		b.Fatal(err)
	}
	e := notify.StatusEvent{Type: notify.EventDeliverySent, NotificationID: "ntf_1", UserID: "u1", Status: notify.StatusSent, At: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		svc.OnStatus(b.Context(), e)
	}
}

// lostAnswer is the store with a connection that breaks after its first
// event-log write committed: the caller hears an error.
type lostAnswer struct {
	*store.DB
	mu    sync.Mutex
	calls int
}

func (l *lostAnswer) AppendEvent(ctx context.Context, e events.Event) error {
	err := l.DB.AppendEvent(ctx, e)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls++; l.calls == 1 && err == nil {
		return errors.New("append event: connection reset after commit")
	}
	return err
}

// TestEventsLoggedOnce: events emitted at once (group-committed together)
// are each logged and queued once; an event whose log write failed after
// it committed is written again, found logged, and still queued once.
func TestEventsLoggedOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	counted := map[string]int{}
	b := setup(t, events.Options{})
	la := &lostAnswer{DB: b.db}
	svc := events.NewService(events.Options{Store: la, Notifier: b.sent, Now: func() time.Time { return *b.clock },
		Counted: func(t, r string) { mu.Lock(); counted[t+"/"+r]++; mu.Unlock() }})
	ctx := t.Context()
	if _, err := svc.Create(ctx, events.NewSubscription{URL: "https://hooks.example.com/x", Events: []string{events.DeliverySent}}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			svc.OnStatus(ctx, notify.StatusEvent{Type: notify.EventDeliverySent, NotificationID: "ntf_" + strings.Repeat("x", i),
				UserID: "u1", Status: notify.StatusSent, At: *b.clock})
		})
	}
	wg.Wait()
	logged, err := b.db.EventsSince(ctx, b.clock.Add(-time.Minute), "", 2*n)
	if err != nil || len(logged) != n {
		t.Fatalf("logged %d events, %v; want %d", len(logged), err, n)
	}
	queued := map[string]int{}
	for _, r := range b.sent.reqs {
		queued[r.RequestID]++
	}
	for _, e := range logged {
		if queued["evt:"+e.ID+":"+b.sent.reqs[0].Recipient] != 1 {
			t.Errorf("event %s queued %d times, want once", e.ID, queued["evt:"+e.ID+":"+b.sent.reqs[0].Recipient])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(b.sent.reqs) != n || counted["delivery.sent/logged"] != n || len(counted) != 1 || la.calls != n+1 {
		t.Errorf("queued %d, counted %v, %d log writes; want %d queued and logged, one write again", len(b.sent.reqs), counted, la.calls, n)
	}
}
