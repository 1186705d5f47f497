package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/inbox"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

type jobQueue struct {
	mu   sync.Mutex
	jobs []notify.Job
}

func (q *jobQueue) Publish(_ context.Context, j notify.Job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.jobs = append(q.jobs, j)
	return nil
}

// TestProviderStoresWithOutcomeOnce: an inapp delivery's message is stored
// in the same write as its sent outcome and published once that has
// committed; copies of the job, redelivered one after another or racing
// each other, store one message and publish it once.
func TestProviderStoresWithOutcomeOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := storetest.SQLite(t)
	var (
		mu        sync.Mutex
		published []inbox.Event
	)
	now := func() time.Time { return time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC) }
	var ib *inbox.Service
	ib = inbox.New(inbox.Options{Store: db, Now: now, Publish: func(e inbox.Event) error {
		// Published after the commit: the store holds the message, and
		// its delivery is sent.
		stored, err := db.InboxMessages(context.Background(), e.UserID, 0, 10, false)
		if err != nil || len(stored) == 0 || stored[0].Seq != e.Message.Seq {
			t.Errorf("event %+v published before its message was stored (%+v, %v)", e.Message, stored, err)
		}
		if d, err := db.Delivery(context.Background(), notify.DeliveryKey{NotificationID: e.Message.ID, Channel: notify.InApp}); err != nil || d.Status != notify.StatusSent {
			t.Errorf("event published while the delivery is %+v, %v; want sent", d, err)
		}
		mu.Lock()
		published = append(published, e)
		mu.Unlock()
		ib.Receive(e)
		return nil
	}})
	q := &jobQueue{}
	svc := notify.NewService(notify.Options{Store: db, Queue: q, Now: now, Rand: func() float64 { return 1 },
		Providers: map[notify.Channel]notify.Provider{notify.InApp: &inbox.Provider{Inbox: ib}}})

	send := func() (string, notify.Job) {
		t.Helper()
		a, err := svc.Send(ctx, notify.Request{UserID: "u1", Type: "order.shipped", Data: json.RawMessage(`{"order":"#42","name":"Ann"}`),
			Channels: []notify.Channel{notify.InApp}})
		if err != nil {
			t.Fatal(err)
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		j := q.jobs[len(q.jobs)-1]
		q.jobs = nil
		return a.NotificationID, j
	}
	check := func(id string, seq int64, events int) {
		t.Helper()
		list, err := db.InboxMessages(ctx, "u1", 0, 10, false)
		if err != nil || len(list) != int(seq) || list[0].ID != id || list[0].Seq != seq || list[0].Subject != "Order #42 shipped" {
			t.Fatalf("inbox = %+v, %v; want %d messages, %s newest with seq %d", list, err, seq, id, seq)
		}
		d, err := db.Delivery(ctx, notify.DeliveryKey{NotificationID: id, Channel: notify.InApp})
		if want := fmt.Sprintf("u1:%d", seq); err != nil || d.Status != notify.StatusSent || d.Attempts != 1 || d.ProviderMessageID != want {
			t.Errorf("delivery = %+v, %v; want sent after 1 attempt, provider message id %s", d, err, want)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(published) != events {
			t.Fatalf("published %d events, want %d", len(published), events)
		}
		e := published[events-1]
		if e.Kind != inbox.KindMessage || e.Message.ID != id || e.Message.Seq != seq || e.Unread != int(seq) {
			t.Errorf("event = %+v %+v, want message %s, seq %d, unread %d", e, e.Message, id, seq, seq)
		}
	}

	first, j := send()
	for range 3 { // the job delivered three times, as after crashes
		j.Redelivered = true
		if err := svc.Process(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	check(first, 1, 1)

	second, j := send()
	j.Redelivered = true
	var wg sync.WaitGroup
	for range 4 { // copies racing: each may send, one outcome applies
		wg.Go(func() {
			if err := svc.Process(ctx, j); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	check(second, 2, 2)
}
