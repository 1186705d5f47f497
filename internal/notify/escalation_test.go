package notify_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
)

// alertTemplate is an orders type sent on its other channels first and on
// SMS 10 minutes later unless the user engaged.
func alertTemplate(unless ...string) notify.Template {
	return notify.Template{Type: "alert", Category: notify.Orders,
		Channels:   map[string]map[string]notify.Content{"default": {"en": {Subject: "Order {order}", Body: "Order {order} needs you: https://shop.test/orders/42"}}},
		Escalation: &notify.EscalationRule{After: "10m", Unless: unless, To: []notify.Channel{notify.SMS}}}
}

func alert(user string, chs ...notify.Channel) notify.Request {
	return notify.Request{UserID: user, Type: "alert", Data: []byte(`{"order":"#42"}`), Channels: chs}
}

// clicks is the link shortener's side of engagement: the clicks on the
// notification's tracked link.
type clicks struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *clicks) ShortenLinks(_ context.Context, _, body string) string { return body }
func (c *clicks) Links(_ context.Context, id string) ([]notify.Link, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return []notify.Link{{Code: "abc1234", Clicks: c.n[id], BotHits: 3}}, nil
}

// reads is the in-app inbox's side of engagement.
type reads map[string]bool

func (r reads) NotificationRead(_ context.Context, _, id string) (bool, error) { return r[id], nil }

func TestEscalation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// engage acts on the notification before the escalation is due.
		engage   func(t *testing.T, b *escBundle, id string)
		unless   []string
		wantSMS  bool
		wantWhy  string
		channels []notify.Channel
	}{
		{name: "no engagement sends the SMS", wantSMS: true},
		{name: "a delivered receipt cancels it", wantWhy: "engaged: delivered", engage: func(t *testing.T, b *escBundle, id string) {
			if ok, err := b.db.RecordReceipt(t.Context(), notify.DeliveryKey{NotificationID: id, Channel: notify.Email},
				notify.StatusDelivered, "", b.clock.Now()); err != nil || !ok {
				t.Fatalf("RecordReceipt = %v, %v", ok, err)
			}
		}},
		{name: "a click cancels it", wantWhy: "engaged: clicked", engage: func(t *testing.T, b *escBundle, id string) {
			b.clicks.mu.Lock()
			b.clicks.n[id] = 1
			b.clicks.mu.Unlock()
		}},
		{name: "a read cancels it", wantWhy: "engaged: read", engage: func(t *testing.T, b *escBundle, id string) { b.reads[id] = true }},
		{name: "a condition not listed does not", unless: []string{"clicked"}, wantSMS: true, engage: func(t *testing.T, b *escBundle, id string) {
			b.reads[id] = true
		}},
		{name: "bot hits are no click", wantSMS: true},
		{name: "no other channel: the SMS goes at once", channels: []notify.Channel{notify.SMS}, wantSMS: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := escalationBundle(t, nil)
			b.putTemplate(t, alertTemplate(tt.unless...))
			id := b.send(t, alert("u1", tt.channels...)).NotificationID
			b.drain(t)
			sms := b.statuses(t, id)[notify.SMS]
			if len(tt.channels) != 0 {
				if sms.Status != notify.StatusSent {
					t.Fatalf("SMS = %s, want sent at once", sms.Status)
				}
				return
			}
			if sms.Status != notify.StatusQueued || !sms.NextAttemptAt.Equal(b.clock.Now().Add(10*time.Minute)) ||
				!strings.HasPrefix(sms.Error, "escalation: unless ") {
				t.Fatalf("SMS before the escalation = %+v; want queued, due in 10 minutes, waiting on the escalation", sms)
			}
			if got := len(b.prov.sentOn(notify.Email)); got != 1 {
				t.Fatalf("email sent %d times, want once at once", got)
			}
			if tt.engage != nil {
				tt.engage(t, b, id)
			}
			b.clock.Advance(10*time.Minute - time.Second)
			if n, _ := b.svc.QueueDue(t.Context(), 10); n != 0 {
				t.Fatalf("the escalation was queued early")
			}
			b.clock.Advance(time.Second)
			if n, err := b.svc.QueueDue(t.Context(), 10); err != nil || n != 1 {
				t.Fatalf("QueueDue = %d, %v; want the escalation", n, err)
			}
			b.drain(t)
			sms = b.statuses(t, id)[notify.SMS]
			sent := len(b.prov.sentOn(notify.SMS))
			if tt.wantSMS && (sent != 1 || sms.Status != notify.StatusSent) {
				t.Errorf("SMS %s, sent %d times; want sent once", sms.Status, sent)
			}
			if !tt.wantSMS && (sent != 0 || sms.Status != notify.StatusSuppressed || sms.Error != tt.wantWhy) {
				t.Errorf("SMS %s %q, sent %d times; want suppressed %q and nothing sent", sms.Status, sms.Error, sent, tt.wantWhy)
			}
		})
	}
}

// escBundle is a bundle whose service sees link clicks and inbox reads.
type escBundle struct {
	*bundle
	clicks *clicks
	reads  reads
}

func escalationBundle(t *testing.T, mod func(*notify.Options)) *escBundle {
	t.Helper()
	c, r := &clicks{n: map[string]int64{}}, reads{}
	b := setup(t, func(o *notify.Options) {
		o.Links, o.Reads = c, r
		if mod != nil {
			mod(o)
		}
	})
	return &escBundle{bundle: b, clicks: c, reads: r}
}

// TestEscalationFiresOnceOnTwoNodes runs the timer on two nodes at once,
// on SQLite and on PostgreSQL: both queue the due delivery, both process
// every copy; one SMS.
func TestEscalationFiresOnceOnTwoNodes(t *testing.T) {
	t.Parallel()
	onBothEngines(t, func(t *testing.T, st notify.Store) {
		escalationOnTwoNodes(t, st)
	})
}

func escalationOnTwoNodes(t *testing.T, st notify.Store) {
	t.Helper()
	a := escalationBundle(t, func(o *notify.Options) { o.Store = st })
	bNode := escalationBundle(t, func(o *notify.Options) { o.Store = st; o.Now = a.clock.Now })
	a.putTemplate(t, alertTemplate())
	id := a.send(t, alert("u1")).NotificationID
	a.drain(t)
	a.clock.Advance(10 * time.Minute)
	var wg sync.WaitGroup
	for _, node := range []*escBundle{a, bNode} {
		wg.Go(func() {
			if _, err := node.svc.QueueDue(t.Context(), 10); err != nil {
				t.Errorf("QueueDue: %v", err)
			}
		})
	}
	wg.Wait()
	// Both nodes process every copy (no queue deduplication here).
	jobs := append(a.q.take(), bNode.q.take()...)
	for _, j := range jobs {
		for _, node := range []*escBundle{a, bNode} {
			wg.Go(func() { _ = node.svc.Process(t.Context(), j) })
		}
	}
	wg.Wait()
	if sent := len(a.prov.sentOn(notify.SMS)) + len(bNode.prov.sentOn(notify.SMS)); sent != 1 {
		t.Errorf("SMS sent %d times from %d jobs, want once", sent, len(jobs))
	}
	if d := a.statuses(t, id)[notify.SMS]; d.Status != notify.StatusSent || d.Attempts != 1 {
		t.Errorf("SMS delivery %+v, want sent after 1 attempt", d)
	}
}

// TestEscalationSurvivesRestart stops the node that accepted the
// notification and starts another on the same SQLite file after the
// escalation is due: it sends the SMS, once.
func TestEscalationSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "data")
	open := func() *store.DB {
		db, err := store.Open(ctx, store.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	first := escalationBundle(t, func(o *notify.Options) { o.Store = db })
	first.db = db
	first.putTemplate(t, alertTemplate())
	id := first.send(t, alert("u1")).NotificationID
	first.drain(t)
	db.Close() // stopped with the timer pending

	db = open()
	second := escalationBundle(t, func(o *notify.Options) { o.Store = db })
	second.db = db
	second.clock.Advance(10 * time.Minute)
	if n, err := second.svc.QueueDue(ctx, 10); err != nil || n != 1 {
		t.Fatalf("QueueDue after the restart = %d, %v; want the escalation", n, err)
	}
	second.drain(t)
	if sent := len(second.prov.sentOn(notify.SMS)); sent != 1 {
		t.Errorf("SMS sent %d times after the restart, want once", sent)
	}
	if d := second.statuses(t, id)[notify.SMS]; d.Status != notify.StatusSent {
		t.Errorf("SMS delivery %s, want sent", d.Status)
	}
	if n, _ := second.svc.QueueDue(ctx, 10); n != 0 {
		t.Errorf("the escalation is still due after it was sent")
	}
}

// TestDigestThenEscalate: a type that digests and escalates digests its
// events, and its digest's message escalates (with the digest's text).
func TestDigestThenEscalate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := escalationBundle(t, nil)
	tpl := newsTemplate("10m", 0)
	tpl.Escalation = &notify.EscalationRule{After: "5m", To: []notify.Channel{notify.SMS}}
	b.putTemplate(t, tpl)
	ids := []string{b.send(t, news("u1", "a", notify.Email)).NotificationID, b.send(t, news("u1", "b", notify.Email)).NotificationID}
	if ds := b.statuses(t, ids[0]); len(ds) != 1 || ds[notify.Email].Error != notify.ReasonDigested {
		t.Fatalf("event's deliveries = %+v; want its email digested and no escalation", ds)
	}
	b.clock.Advance(10 * time.Minute)
	if n, err := b.svc.SendDueDigests(ctx, 10); err != nil || n != 1 {
		t.Fatalf("SendDueDigests = %d, %v", n, err)
	}
	b.drain(t)
	if got := len(b.prov.sentOn(notify.Email)); got != 1 || len(b.prov.sentOn(notify.SMS)) != 0 {
		t.Fatalf("sent %d emails and %d SMS; want the digest by email only", got, len(b.prov.sentOn(notify.SMS)))
	}
	b.clock.Advance(5 * time.Minute)
	if n, err := b.svc.QueueDue(ctx, 10); err != nil || n != 1 {
		t.Fatalf("QueueDue = %d, %v; want the digest's escalation", n, err)
	}
	b.drain(t)
	if ms := b.prov.sentOn(notify.SMS); len(ms) != 1 || ms[0].Body != "2 news for Ada:\n- a\n- b" {
		t.Errorf("SMS sent %+v; want the digest's text once", ms)
	}
}
