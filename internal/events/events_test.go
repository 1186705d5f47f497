package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/events"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

// recorder is the Notifier: it keeps the system notifications asked for
// (the pipeline behind it is tested end to end in cmd/sluice). When
// outcome is set, it also saves each in db, as SendSystem does, with its
// delivery already in the status outcome gives (after attempts).
type recorder struct {
	mu      sync.Mutex
	reqs    []notify.SystemRequest
	db      *store.DB
	now     func() time.Time
	outcome func(req notify.SystemRequest) (notify.Status, int)
}

func (r *recorder) SendSystem(ctx context.Context, req notify.SystemRequest) (notify.Accepted, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	id := fmt.Sprintf("ntf_%d", len(r.reqs))
	if r.outcome == nil {
		return notify.Accepted{NotificationID: id}, nil
	}
	st, attempts := r.outcome(req)
	now := r.now()
	n := notify.Notification{ID: id, RequestID: req.RequestID, RequestHash: "h", UserID: notify.SystemUserPrefix + req.Recipient,
		Type: req.Type, Category: notify.Orders, Data: req.Data, Channels: []notify.Channel{notify.Webhook}, CreatedAt: now}
	d := notify.Delivery{NotificationID: id, Channel: notify.Webhook, UserID: n.UserID, Category: notify.Orders, Provider: "events",
		Status: st, Attempts: attempts, CreatedAt: now, UpdatedAt: now}
	if _, _, err := r.db.CreateNotification(ctx, n, []notify.Delivery{d}); err != nil {
		return notify.Accepted{}, err
	}
	return notify.Accepted{NotificationID: id}, nil
}

// queued returns the notification ids carried by the events queued from
// the i-th request on, in order.
func (r *recorder) queued(i int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, req := range r.reqs[i:] {
		var e struct {
			Data struct {
				NotificationID string `json:"notification_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(req.Data, &e)
		out = append(out, e.Data.NotificationID)
	}
	return out
}

type bundle struct {
	svc   *events.Service
	db    *store.DB
	sent  *recorder
	clock *time.Time
}

func setup(t *testing.T, o events.Options) bundle {
	t.Helper()
	db := storetest.SQLite(t)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := bundle{db: db, clock: &now}
	b.sent = &recorder{db: db, now: func() time.Time { return *b.clock }}
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
	rec, err := b.svc.Recover(ctx, sub.ID, b.clock.Add(-time.Minute), false)
	if err != nil || rec.Queued != 1 || len(b.sent.reqs) != 1 || b.sent.reqs[0].Recipient != sub.ID {
		t.Fatalf("Recover = %+v, %v; queued %+v", rec, err, b.sent.reqs)
	}
	if got, _ := b.svc.Subscription(ctx, sub.ID); !got.DisabledAt.IsZero() || got.Failures != 0 {
		t.Errorf("after Recover: %+v, want enabled, run cleared", got)
	}
	// A second recover, of all, queues it again under another request id
	// (the webhook-id, the event id, stays).
	if _, err := b.svc.Recover(ctx, sub.ID, b.clock.Add(-time.Minute), true); err != nil || len(b.sent.reqs) != 2 ||
		b.sent.reqs[0].RequestID == b.sent.reqs[1].RequestID || string(b.sent.reqs[0].Data) != string(b.sent.reqs[1].Data) {
		t.Errorf("second Recover queued %+v, %v", b.sent.reqs, err)
	}
	if _, err := b.svc.Recover(ctx, sub.ID, b.clock.Add(-8*24*time.Hour), false); !apperr.Is(err, apperr.Unprocessable) {
		t.Errorf("Recover before the retention = %v, want 422", err)
	}
}

// TestRecoverResendsWhatFailed: an endpoint that received some events
// and not others gets only the others on recover (events it does not want
// aside), then nothing more while those are on their way; with all, it
// gets every one again.
func TestRecoverResendsWhatFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Options{})
	ctx := t.Context()
	sub, err := b.svc.Create(ctx, events.NewSubscription{URL: "https://hooks.example.com/x", Events: []string{events.DeliverySent}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.svc.Create(ctx, events.NewSubscription{URL: "https://other.example.com/x", Events: []string{events.DeliverySent, events.DeliveryDead}})
	if err != nil {
		t.Fatal(err)
	}
	// sub received ntf_1 and ntf_4; ntf_2 went dead, ntf_3 failed for good,
	// ntf_5 is retrying after failures and ntf_6 is on its first attempt.
	// other received all. What recovers queue is on its first attempt.
	outcomes := map[string]notify.Status{"ntf_1": notify.StatusSent, "ntf_2": notify.StatusDead, "ntf_3": notify.StatusFailed,
		"ntf_4": notify.StatusDelivered, "ntf_5": notify.StatusQueued, "ntf_6": notify.StatusQueued}
	b.sent.outcome = func(req notify.SystemRequest) (notify.Status, int) {
		if req.Recipient == other.ID {
			return notify.StatusSent, 1
		}
		if strings.Count(req.RequestID, ":") == 3 {
			return notify.StatusQueued, 0
		}
		for ntf, st := range outcomes {
			if strings.Contains(string(req.Data), `"notification_id":"`+ntf+`"`) {
				if ntf == "ntf_6" {
					return st, 0
				}
				return st, 2
			}
		}
		return notify.StatusQueued, 0
	}
	since := *b.clock
	for i := 1; i <= 6; i++ {
		*b.clock = b.clock.Add(time.Second)
		b.svc.OnStatus(ctx, notify.StatusEvent{Type: notify.EventDeliverySent, NotificationID: fmt.Sprintf("ntf_%d", i), UserID: "u1",
			Status: notify.StatusSent, At: *b.clock})
	}
	b.svc.OnStatus(ctx, notify.StatusEvent{Type: notify.EventDeliveryDead, NotificationID: "ntf_9", UserID: "u1", At: *b.clock})
	*b.clock = b.clock.Add(time.Minute)

	start := len(b.sent.reqs)
	rec, err := b.svc.Recover(ctx, sub.ID, since, false)
	if got := b.sent.queued(start); err != nil || rec.Queued != 3 || rec.More || fmt.Sprint(got) != "[ntf_2 ntf_3 ntf_5]" ||
		!rec.Until.Equal(since.Add(5*time.Second)) {
		t.Fatalf("Recover = %+v, %v, queued %v; want ntf_2, ntf_3 and ntf_5, until the fifth", rec, err, got)
	}
	for _, req := range b.sent.reqs[start:] {
		if req.Recipient != sub.ID {
			t.Errorf("Recover(%s) queued to %s", sub.ID, req.Recipient)
		}
	}
	start = len(b.sent.reqs)
	if rec, err := b.svc.Recover(ctx, sub.ID, since, false); err != nil || rec.Queued != 0 || !rec.Until.Equal(since) {
		t.Errorf("Recover again = %+v, %v, queued %v; want nothing (on their way), until since", rec, err, b.sent.queued(start))
	}
	rec, err = b.svc.Recover(ctx, sub.ID, since, true)
	if got := b.sent.queued(start); err != nil || rec.Queued != 6 || fmt.Sprint(got) != "[ntf_1 ntf_2 ntf_3 ntf_4 ntf_5 ntf_6]" {
		t.Errorf("Recover(all) = %+v, %v, queued %v; want every delivery.sent", rec, err, got)
	}
	// other, which received everything, gets nothing.
	if rec, err := b.svc.Recover(ctx, other.ID, since, false); err != nil || rec.Queued != 0 {
		t.Errorf("Recover(other) = %+v, %v; want nothing", rec, err)
	}
}

// TestRecoverPages: with MaxRecover, each call queues that many of the
// events not received and says whether more remain; calling again from
// Until queues the rest, none twice, events sharing Until's time
// included.
func TestRecoverPages(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Options{MaxRecover: 2})
	ctx := t.Context()
	sub, err := b.svc.Create(ctx, events.NewSubscription{URL: "https://hooks.example.com/x", Events: []string{events.DeliverySent}})
	if err != nil {
		t.Fatal(err)
	}
	// Every first delivery went dead but ntf_5's; recovers' are queued.
	b.sent.outcome = func(req notify.SystemRequest) (notify.Status, int) {
		switch {
		case strings.Count(req.RequestID, ":") == 3:
			return notify.StatusQueued, 0
		case strings.Contains(string(req.Data), `"ntf_5"`):
			return notify.StatusSent, 1
		}
		return notify.StatusDead, 5
	}
	since := *b.clock
	// ntf_2 and ntf_3 share a time, the Until of the first page, which
	// queues one of them (their ids order them at random).
	for i, step := range []time.Duration{time.Second, time.Second, 0, time.Second, time.Second, time.Second} {
		*b.clock = b.clock.Add(step)
		b.svc.OnStatus(ctx, notify.StatusEvent{Type: notify.EventDeliverySent, NotificationID: fmt.Sprintf("ntf_%d", i+1), UserID: "u1",
			Status: notify.StatusSent, At: *b.clock})
	}
	*b.clock = b.clock.Add(time.Minute)
	var got []string
	from, calls := since, 0
	for call := range 5 {
		calls++
		start := len(b.sent.reqs)
		rec, err := b.svc.Recover(ctx, sub.ID, from, false)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b.sent.queued(start)...)
		if rec.Queued != len(b.sent.reqs)-start || (rec.More && rec.Queued != 2) {
			t.Errorf("call %d: %+v after %d queued", call, rec, len(b.sent.reqs)-start)
		}
		if !rec.More {
			break
		}
		from = rec.Until
	}
	slices.Sort(got)
	if fmt.Sprint(got) != "[ntf_1 ntf_2 ntf_3 ntf_4 ntf_6]" || calls != 3 {
		t.Errorf("recovered %v over %d calls; want each not received once, over 3 calls", got, calls)
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
	db := storetest.SQLite(b)
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
	db := storetest.SQLite(b)
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
