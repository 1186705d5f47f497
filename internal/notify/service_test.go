package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// recQueue records published jobs.
type recQueue struct {
	mu   sync.Mutex
	jobs []notify.Job
	fail bool
}

func (q *recQueue) Publish(_ context.Context, j notify.Job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail {
		return errors.New("queue down")
	}
	q.jobs = append(q.jobs, j)
	return nil
}

// msgIDs returns the distinct message ids of jobs: what JetStream keeps
// of them (it stores one job per Nats-Msg-Id within its window).
func msgIDs(jobs []notify.Job) map[string]bool {
	ids := map[string]bool{}
	for _, j := range jobs {
		ids[j.MsgID()] = true
	}
	return ids
}

// take returns and forgets the jobs published so far.
func (q *recQueue) take() []notify.Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.jobs
	q.jobs = nil
	return out
}

// scripted is a provider whose answers a test scripts.
type scripted struct {
	name  string
	mu    sync.Mutex
	errs  []error // answers, in order; nil (or none left) is success
	sent  []notify.Message
	calls int
}

func (p *scripted) Name() string       { return p.name }
func (p *scripted) NeedsContact() bool { return false }
func (p *scripted) Send(_ context.Context, m notify.Message) (notify.Receipt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	var err error
	if len(p.errs) > 0 {
		err, p.errs = p.errs[0], p.errs[1:]
	}
	if err == nil {
		p.sent = append(p.sent, m)
	}
	return notify.Receipt{}, err
}

func (p *scripted) script(errs ...error) { p.mu.Lock(); p.errs = errs; p.mu.Unlock() }
func (p *scripted) count() (calls, sent int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls, len(p.sent)
}

type bundle struct {
	svc   *notify.Service
	db    *store.DB
	q     *recQueue
	clock *ratelimittest.Clock
	prov  *scripted
}

// setup builds a Service on a fresh SQLite store, a recording queue and a
// scripted provider on every channel; rand is fixed at 1 (the full wait).
func setup(t testing.TB, mod func(*notify.Options)) *bundle {
	t.Helper()
	db := storetest.SQLite(t)
	b := &bundle{db: db, q: &recQueue{}, clock: ratelimittest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)), prov: &scripted{name: "scripted"}}
	opts := notify.Options{
		Store: db, Queue: b.q, Now: b.clock.Now, Rand: func() float64 { return 1 },
		Providers: map[notify.Channel]notify.Provider{notify.Email: b.prov, notify.SMS: b.prov, notify.Push: b.prov, notify.Webhook: b.prov},
	}
	if mod != nil {
		mod(&opts)
	}
	b.svc = notify.NewService(opts)
	return b
}

func (b *bundle) send(t *testing.T, req notify.Request) notify.Accepted {
	t.Helper()
	a, err := b.svc.Send(t.Context(), req)
	if err != nil {
		t.Fatalf("Send(%+v): %v", req, err)
	}
	return a
}

// drain processes every published job until none are left.
func (b *bundle) drain(t *testing.T) {
	t.Helper()
	for range 100 {
		jobs := b.q.take()
		if len(jobs) == 0 {
			return
		}
		for _, j := range jobs {
			if err := b.svc.Process(t.Context(), j); err != nil {
				t.Fatalf("Process(%s): %v", j.MsgID(), err)
			}
		}
	}
	t.Fatal("jobs keep coming")
}

func (b *bundle) statuses(t *testing.T, id string) map[notify.Channel]notify.Delivery {
	t.Helper()
	rec, err := b.svc.Notification(t.Context(), id)
	if err != nil {
		t.Fatalf("Notification(%s): %v", id, err)
	}
	out := map[notify.Channel]notify.Delivery{}
	for _, d := range rec.Deliveries {
		out[d.Channel] = d
	}
	return out
}

func TestSendRefusesBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	big := `{"x":"` + strings.Repeat("a", notify.MaxDataBytes) + `"}`
	tests := []struct {
		name  string
		req   notify.Request
		code  apperr.Code
		field string
	}{
		{"missing user_id", notify.Request{Type: "otp"}, apperr.Unprocessable, "user_id"},
		{"missing type", notify.Request{UserID: "u1"}, apperr.Unprocessable, "type"},
		{"unknown type", notify.Request{UserID: "u1", Type: "telepathy"}, apperr.Unprocessable, "type"},
		{"data over 64 KiB", notify.Request{UserID: "u1", Type: "otp", Data: json.RawMessage(big)}, apperr.Unprocessable, "data"},
		{"data not an object", notify.Request{UserID: "u1", Type: "otp", Data: json.RawMessage(`[1]`)}, apperr.Unprocessable, "data"},
		{"request_id over 255", notify.Request{RequestID: strings.Repeat("r", 256), UserID: "u1", Type: "otp"}, apperr.Unprocessable, "request_id"},
		{"expires_at in the past", notify.Request{UserID: "u1", Type: "otp", ExpiresAt: b.clock.Now().Add(-time.Second)}, apperr.Unprocessable, "expires_at"},
		{"unknown channel", notify.Request{UserID: "u1", Type: "otp", Channels: []notify.Channel{"fax"}}, apperr.Unprocessable, "channels[0]"},
		{"control characters in user_id", notify.Request{UserID: "u\x001", Type: "otp"}, apperr.Unprocessable, "user_id"},
	}
	for _, tt := range tests {
		_, err := b.svc.Send(t.Context(), tt.req)
		ae, ok := errors.AsType[*apperr.Error](err)
		if !ok || ae.Code != tt.code || len(ae.Fields) == 0 || ae.Fields[0].Field != tt.field {
			t.Errorf("%s: Send = %v, want %s naming %s", tt.name, err, tt.code, tt.field)
		}
	}
	if recs, _, err := b.svc.UserNotifications(t.Context(), "u1", "", 10); err != nil || len(recs) != 0 {
		t.Errorf("after refused requests: %d notifications, %v; want none saved", len(recs), err)
	}
	if jobs := b.q.take(); len(jobs) != 0 {
		t.Errorf("after refused requests: %d jobs queued, want none", len(jobs))
	}
}

func TestSendIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	req := notify.Request{RequestID: "order-9001-shipped", UserID: "u1", Type: "order.shipped", Data: json.RawMessage(`{"order":"#42","name":"Ann"}`)}
	first := b.send(t, req)
	if first.Duplicate {
		t.Fatal("first Send reported a duplicate")
	}
	firstJobs := msgIDs(b.q.take())
	queued := len(firstJobs)
	// Same body, keys in another order: the same request.
	again := req
	again.Data = json.RawMessage(`{ "name": "Ann", "order": "#42" }`)
	second := b.send(t, again)
	if !second.Duplicate || second.NotificationID != first.NotificationID {
		t.Errorf("repeat = %+v, want a duplicate of %s", second, first.NotificationID)
	}
	for id := range msgIDs(b.q.take()) {
		if !firstJobs[id] {
			t.Errorf("repeat queued job %s, not one of the first request's (the queue would hold it twice)", id)
		}
	}
	// A first request whose jobs never reached the queue (its node died
	// before): the repeat queues them.
	lost := req
	lost.RequestID = "order-9002-shipped"
	b.q.fail = true
	b.send(t, lost)
	b.q.fail = false
	if n := len(b.q.take()); n != 0 {
		t.Fatalf("a failing queue took %d jobs", n)
	}
	if again := b.send(t, lost); !again.Duplicate {
		t.Fatalf("repeat of the lost request = %+v, want a duplicate", again)
	}
	if n := len(msgIDs(b.q.take())); n != queued {
		t.Errorf("repeat of a request whose jobs were lost queued %d jobs, want %d", n, queued)
	}
	changed := req
	changed.Data = json.RawMessage(`{"order":"#43"}`)
	if _, err := b.svc.Send(t.Context(), changed); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("same request_id, different body = %v, want Conflict", err)
	}

	// A second node (its own memory fast path, the same store) refuses the
	// clashing body without remembering it, so the first body's retry
	// still finds its notification there.
	node2 := notify.NewService(notify.Options{Store: b.db, Queue: b.q, Now: b.clock.Now,
		Providers: map[notify.Channel]notify.Provider{notify.Email: b.prov, notify.SMS: b.prov, notify.Push: b.prov, notify.Webhook: b.prov}})
	if _, err := node2.Send(t.Context(), changed); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("other node, different body = %v, want Conflict", err)
	}
	if a, err := node2.Send(t.Context(), req); err != nil || !a.Duplicate || a.NotificationID != first.NotificationID {
		t.Errorf("other node, the first body again = %+v, %v; want a duplicate of %s", a, err, first.NotificationID)
	}

	// The fast path forgets (a restart, Redis losing keys): the store's
	// unique request_id still answers.
	forgetful := setup(t, func(o *notify.Options) { o.Dedupe = nopDedupe{} })
	a := forgetful.send(t, req)
	if d := forgetful.send(t, req); !d.Duplicate || d.NotificationID != a.NotificationID {
		t.Errorf("without the fast path, repeat = %+v, want a duplicate of %s", d, a.NotificationID)
	}
	if _, err := forgetful.svc.Send(t.Context(), changed); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("without the fast path, different body = %v, want Conflict", err)
	}
}

// nopDedupe never remembers anything.
type nopDedupe struct{}

func (nopDedupe) Claim(context.Context, string, string) (string, bool, error) { return "", true, nil }
func (nopDedupe) Release(context.Context, string) error                       { return nil }

func TestSendConcurrentDuplicatesMakeOneNotification(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		dedupe notify.Dedupe
	}{{"memory fast path", nil}, {"store only", nopDedupe{}}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(o *notify.Options) { o.Dedupe = tt.dedupe })
			req := notify.Request{RequestID: "race-1", UserID: "u1", Type: "otp", Data: json.RawMessage(`{"code":"1"}`)}
			const n = 64
			ids := make(chan string, n)
			var wg sync.WaitGroup
			for range n {
				wg.Go(func() {
					a, err := b.svc.Send(context.Background(), req)
					if err != nil {
						t.Errorf("Send: %v", err)
						return
					}
					ids <- a.NotificationID
				})
			}
			wg.Wait()
			close(ids)
			seen := map[string]int{}
			for id := range ids {
				seen[id]++
			}
			if len(seen) != 1 {
				t.Errorf("%d concurrent identical requests gave %d notification ids, want 1: %v", n, len(seen), seen)
			}
			recs, _, err := b.svc.UserNotifications(t.Context(), "u1", "", 100)
			if err != nil || len(recs) != 1 {
				t.Errorf("stored %d notifications, %v; want 1", len(recs), err)
			}
			if jobs := msgIDs(b.q.take()); len(jobs) != 3 {
				t.Errorf("queued %d distinct jobs, want 3 (email, sms, push once)", len(jobs))
			}
		})
	}
}

func TestSendSuppression(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := t.Context()
	if _, err := b.svc.PutSettings(ctx, "u1", notify.Settings{
		Channels:   map[notify.Channel]bool{notify.SMS: false},
		Categories: map[notify.Category]bool{notify.Marketing: false},
	}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		req      notify.Request
		want     map[notify.Channel]string // channel -> status or reason
		wantJobs int
	}{
		{"muted channel", notify.Request{UserID: "u1", Type: "order.shipped"},
			map[notify.Channel]string{notify.Email: "queued", notify.SMS: notify.ReasonChannelOff, notify.Push: "queued", notify.Webhook: notify.ReasonChannelOff,
				notify.InApp: notify.ReasonNoContact}, 2}, // no inbox provider in this bundle
		{"muted category", notify.Request{UserID: "u1", Type: "flash_sale"},
			map[notify.Channel]string{notify.Email: notify.ReasonCategoryMuted, notify.SMS: notify.ReasonChannelOff, notify.Push: notify.ReasonCategoryMuted, notify.Webhook: notify.ReasonChannelOff,
				notify.InApp: notify.ReasonCategoryMuted}, 0},
		{"narrowed", notify.Request{UserID: "u1", Type: "order.shipped", Channels: []notify.Channel{notify.Email}},
			map[notify.Channel]string{notify.Email: "queued"}, 1},
		{"critical on a muted channel falls back to an enabled one", notify.Request{UserID: "u1", Type: "otp", Channels: []notify.Channel{notify.SMS}},
			map[notify.Channel]string{notify.SMS: notify.ReasonChannelOff, notify.Email: "queued"}, 1},
	}
	for _, tt := range tests {
		a := b.send(t, tt.req)
		got := map[notify.Channel]string{}
		for ch, d := range b.statuses(t, a.NotificationID) {
			got[ch] = string(d.Status)
			if d.Status == notify.StatusSuppressed {
				got[ch] = d.Error
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: deliveries = %v, want %v", tt.name, got, tt.want)
		}
		if jobs := b.q.take(); len(jobs) != tt.wantJobs {
			t.Errorf("%s: %d jobs queued, want %d", tt.name, len(jobs), tt.wantJobs)
		}
	}
}

func TestQuietHoursDelayNonCritical(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := t.Context()
	// 12:00 UTC is inside 11:00-13:00.
	if _, err := b.svc.PutSettings(ctx, "u1", notify.Settings{QuietHours: notify.QuietHours{Start: "11:00", End: "13:00"}}); err != nil {
		t.Fatal(err)
	}
	otp := b.send(t, notify.Request{UserID: "u1", Type: "otp", Channels: []notify.Channel{notify.Email}})
	sale := b.send(t, notify.Request{UserID: "u1", Type: "flash_sale", Channels: []notify.Channel{notify.Email}})
	jobs := b.q.take()
	if len(jobs) != 1 || jobs[0].NotificationID != otp.NotificationID {
		t.Fatalf("jobs queued during quiet hours = %v, want only the OTP", jobs)
	}
	if d := b.statuses(t, sale.NotificationID)[notify.Email]; d.Status != notify.StatusQueued || !d.NextAttemptAt.Equal(b.clock.Now().Add(time.Hour)) {
		t.Errorf("flash sale during quiet hours = %+v, want queued until 13:00", d)
	}
	if n, err := b.svc.QueueDue(ctx, 100); err != nil || n != 0 {
		t.Errorf("QueueDue before 13:00 = %d, %v; want 0", n, err)
	}
	b.clock.Advance(time.Hour)
	if n, err := b.svc.QueueDue(ctx, 100); err != nil || n != 1 {
		t.Errorf("QueueDue at 13:00 = %d, %v; want 1", n, err)
	}
	b.drain(t)
	if d := b.statuses(t, sale.NotificationID)[notify.Email]; d.Status != notify.StatusSent {
		t.Errorf("flash sale after quiet hours = %s, want sent", d.Status)
	}
}

func TestMarketingCapThrottles(t *testing.T) {
	t.Parallel()
	var capLim *ratelimit.PolicyLimiter
	b := setup(t, func(o *notify.Options) {
		var err error
		capLim, err = ratelimit.NewPolicyLimiter(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: o.Now}),
			ratelimit.Policy{Name: "cap", Algorithm: ratelimit.TokenBucket, Limit: 2, Period: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		o.MarketingCap = capLim
	})
	var last notify.Accepted
	for range 3 {
		last = b.send(t, notify.Request{UserID: "u1", Type: "price_drop", Channels: []notify.Channel{notify.Email}})
	}
	if d := b.statuses(t, last.NotificationID)[notify.Email]; d.Status != notify.StatusSuppressed || d.Error != notify.ReasonThrottled {
		t.Errorf("third marketing message in a day = %s %q, want suppressed throttled", d.Status, d.Error)
	}
	otp := b.send(t, notify.Request{UserID: "u1", Type: "otp", Channels: []notify.Channel{notify.Email}})
	if d := b.statuses(t, otp.NotificationID)[notify.Email]; d.Status != notify.StatusQueued {
		t.Errorf("an OTP after the marketing cap = %s, want queued (the cap is marketing only)", d.Status)
	}
	other := b.send(t, notify.Request{UserID: "u2", Type: "price_drop", Channels: []notify.Channel{notify.Email}})
	if d := b.statuses(t, other.NotificationID)[notify.Email]; d.Status != notify.StatusQueued {
		t.Errorf("another user's marketing = %s, want queued (the cap is per user)", d.Status)
	}
}

// TestPrefetchSettingsMatchesReads: settings prefetched for a batch decide
// suppression as a per-user read would, for users with and without stored
// settings.
func TestPrefetchSettingsMatchesReads(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	off := notify.DefaultSettings()
	off.Channels[notify.SMS] = false
	if _, err := b.svc.PutSettings(t.Context(), "quiet", off); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.PrefetchSettings(t.Context(), []string{"quiet", "plain", "quiet"}); err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]notify.Status{"quiet": notify.StatusSuppressed, "plain": notify.StatusQueued} {
		a := b.send(t, notify.Request{UserID: user, Type: "order.shipped", Data: json.RawMessage(`{"order":"#1"}`),
			Channels: []notify.Channel{notify.SMS}})
		if got := b.statuses(t, a.NotificationID)[notify.SMS].Status; got != want {
			t.Errorf("%s: sms delivery %s, want %s", user, got, want)
		}
	}
}

// blackHoleDedupe is a fast path whose engine never answers (Redis
// black-holed): every call blocks until its context ends.
type blackHoleDedupe struct{ calls atomic.Int32 }

func (d *blackHoleDedupe) Claim(ctx context.Context, _, _ string) (string, bool, error) {
	d.calls.Add(1)
	<-ctx.Done()
	return "", false, ctx.Err()
}

func (d *blackHoleDedupe) Release(ctx context.Context, _ string) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestSendWithBlackHoledDedupe: a fast path that never answers costs a
// request its short deadline, not the request; the store's unique
// request_id still makes the repeat a duplicate.
func TestSendWithBlackHoledDedupe(t *testing.T) {
	t.Parallel()
	hole := &blackHoleDedupe{}
	b := setup(t, func(o *notify.Options) { o.Dedupe = hole; o.DedupeTimeout = 50 * time.Millisecond })
	req := notify.Request{RequestID: "bh-1", UserID: "u1", Type: "otp", Data: json.RawMessage(`{"code":"1"}`)}
	send := func() notify.Accepted {
		t.Helper()
		type result struct {
			a   notify.Accepted
			err error
		}
		done := make(chan result, 1)
		go func() {
			a, err := b.svc.Send(context.Background(), req) // no deadline of its own, as an HTTP request's
			done <- result{a, err}
		}()
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("Send: %v", r.err)
			}
			return r.a
		case <-time.After(10 * time.Second):
			t.Fatal("Send still waiting on the black-holed fast path after 10s")
			return notify.Accepted{}
		}
	}
	first := send()
	again := send()
	if !again.Duplicate || again.NotificationID != first.NotificationID {
		t.Errorf("repeat = %+v, want a duplicate of %s (the store's request_id)", again, first.NotificationID)
	}
	if n := hole.calls.Load(); n != 2 {
		t.Errorf("fast path asked %d times, want 2", n)
	}
}
