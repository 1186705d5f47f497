package notify_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

func TestProcessSendsOnceAndRenders(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.send(t, notify.Request{UserID: "u1", Type: "order.shipped", Data: json.RawMessage(`{"order":"#42","name":"Ann"}`),
		Channels: []notify.Channel{notify.Email}})
	jobs := b.q.take()
	if len(jobs) != 1 || jobs[0].MsgID() != a.NotificationID+":email" {
		t.Fatalf("jobs = %+v, want one with message id %s:email", jobs, a.NotificationID)
	}
	for range 3 { // the job delivered three times, as after crashes
		if err := b.svc.Process(t.Context(), jobs[0]); err != nil {
			t.Fatal(err)
		}
	}
	if calls, _ := b.prov.count(); calls != 1 {
		t.Errorf("provider called %d times for one job delivered thrice, want 1", calls)
	}
	m := b.prov.sent[0]
	if m.Subject != "Order #42 shipped" || m.Body != "Hi Ann, order #42 is on its way. Track it: see your orders page" ||
		m.IdempotencyKey != a.NotificationID+":email" || m.Attempt != 1 {
		t.Errorf("message = %+v", m)
	}
	if d := b.statuses(t, a.NotificationID)[notify.Email]; d.Status != notify.StatusSent || d.Attempts != 1 {
		t.Errorf("delivery = %s after %d attempts, want sent after 1", d.Status, d.Attempts)
	}
}

func TestProcessRetriesThenSends(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.prov.script(notify.Temporary(errors.New("timeout"), 0), notify.Temporary(errors.New("503"), 10*time.Second))
	a := b.send(t, notify.Request{UserID: "u1", Type: "order.confirmed", Channels: []notify.Channel{notify.Email}})
	b.drain(t)
	d := b.statuses(t, a.NotificationID)[notify.Email]
	if d.Status != notify.StatusQueued || d.Attempts != 1 || d.Error != "timeout" || !d.NextAttemptAt.Equal(b.clock.Now().Add(time.Second)) {
		t.Fatalf("after a timeout: %+v, want queued, 1 attempt, retry in 1s (orders base, rand 1)", d)
	}
	b.clock.Advance(time.Second)
	if n, _ := b.svc.QueueDue(t.Context(), 10); n != 1 {
		t.Fatalf("QueueDue = %d, want the retry", n)
	}
	jobs := b.q.take()
	if want := fmt.Sprintf("%s:email:1@%d", a.NotificationID, b.clock.Now().UnixMicro()); len(jobs) != 1 || jobs[0].MsgID() != want {
		t.Fatalf("retry job = %+v, want message id %s", jobs, want)
	}
	if err := b.svc.Process(t.Context(), jobs[0]); err != nil {
		t.Fatal(err)
	}
	d = b.statuses(t, a.NotificationID)[notify.Email]
	if d.Status != notify.StatusQueued || d.Attempts != 2 || !d.NextAttemptAt.Equal(b.clock.Now().Add(10*time.Second)) {
		t.Fatalf("after a 503 with Retry-After 10s: %+v, want the retry in 10s, not 2s", d)
	}
	b.clock.Advance(10 * time.Second)
	b.svc.QueueDue(t.Context(), 10)
	b.drain(t)
	if d := b.statuses(t, a.NotificationID)[notify.Email]; d.Status != notify.StatusSent || d.Attempts != 3 {
		t.Errorf("after the third attempt: %s, %d attempts; want sent, 3", d.Status, d.Attempts)
	}
}

func TestProcessFailurePaths(t *testing.T) {
	t.Parallel()
	tmp := notify.Temporary(errors.New("timeout"), 0)
	tests := []struct {
		name         string
		typ          string
		errs         []error
		rounds       int
		wantStatus   notify.Status
		wantAttempts int
		wantDead     bool
	}{
		{"orders exhaust 5 attempts into a dead letter", "order.refunded", []error{tmp, tmp, tmp, tmp, tmp}, 5, notify.StatusDead, 5, true},
		{"orders permanent at once", "order.refunded", []error{notify.Permanentf("invalid address")}, 1, notify.StatusDead, 1, true},
		{"marketing retries once then drops", "back_in_stock", []error{tmp, tmp}, 2, notify.StatusFailed, 2, false},
		{"marketing permanent drops", "back_in_stock", []error{notify.Permanentf("unregistered")}, 1, notify.StatusFailed, 1, false},
		{"critical permanent is dead", "password_reset", []error{notify.Permanentf("bad number")}, 1, notify.StatusDead, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			b.prov.script(tt.errs...)
			a := b.send(t, notify.Request{UserID: "u1", Type: tt.typ, Channels: []notify.Channel{notify.Push}})
			for range tt.rounds {
				b.drain(t)
				b.clock.Advance(10 * time.Minute)
				if _, err := b.svc.QueueDue(t.Context(), 10); err != nil {
					t.Fatal(err)
				}
			}
			b.drain(t)
			d := b.statuses(t, a.NotificationID)[notify.Push]
			if d.Status != tt.wantStatus || d.Attempts != tt.wantAttempts {
				t.Fatalf("delivery = %s after %d attempts, want %s after %d", d.Status, d.Attempts, tt.wantStatus, tt.wantAttempts)
			}
			dls, _, err := b.svc.DeadLetters(t.Context(), "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if (len(dls) == 1) != tt.wantDead {
				t.Fatalf("dead letters = %+v, want one: %v", dls, tt.wantDead)
			}
			if !tt.wantDead {
				return
			}
			if dls[0].NotificationID != a.NotificationID || dls[0].Attempts != tt.wantAttempts || dls[0].Error == "" {
				t.Errorf("dead letter = %+v", dls[0])
			}
			// Replay: back to queued, queued by the scheduler, sent.
			if _, err := b.svc.ReplayDeadLetter(t.Context(), dls[0].ID); err != nil {
				t.Fatalf("ReplayDeadLetter: %v", err)
			}
			if _, err := b.svc.ReplayDeadLetter(t.Context(), dls[0].ID); !apperr.Is(err, apperr.Conflict) {
				t.Errorf("second replay = %v, want Conflict", err)
			}
			if n, _ := b.svc.QueueDue(t.Context(), 10); n != 1 {
				t.Fatalf("QueueDue after replay = %d, want 1", n)
			}
			b.drain(t)
			if d := b.statuses(t, a.NotificationID)[notify.Push]; d.Status != notify.StatusSent || d.Attempts != tt.wantAttempts+1 {
				t.Errorf("after replay: %s, %d attempts; want sent, %d", d.Status, d.Attempts, tt.wantAttempts+1)
			}
		})
	}
}

func TestProcessExpired(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.send(t, notify.Request{UserID: "u1", Type: "otp", ExpiresAt: b.clock.Now().Add(30 * time.Second), Channels: []notify.Channel{notify.SMS}})
	b.clock.Advance(time.Minute)
	b.drain(t)
	if calls, _ := b.prov.count(); calls != 0 {
		t.Errorf("provider called %d times for an expired OTP, want 0", calls)
	}
	if d := b.statuses(t, a.NotificationID)[notify.SMS]; d.Status != notify.StatusExpired {
		t.Errorf("delivery = %s, want expired", d.Status)
	}

	// Critical retries until it expires, then stops.
	b.prov.script(notify.Temporary(errors.New("down"), 0), notify.Temporary(errors.New("down"), 0), notify.Temporary(errors.New("down"), 0))
	c := b.send(t, notify.Request{UserID: "u1", Type: "otp", ExpiresAt: b.clock.Now().Add(600 * time.Millisecond), Channels: []notify.Channel{notify.SMS}})
	for range 5 {
		b.drain(t)
		b.clock.Advance(300 * time.Millisecond)
		b.svc.QueueDue(t.Context(), 10)
	}
	if d := b.statuses(t, c.NotificationID)[notify.SMS]; d.Status != notify.StatusExpired || d.Attempts < 2 {
		t.Errorf("critical while the provider is down: %s after %d attempts, want expired after retrying", d.Status, d.Attempts)
	}
}

func TestRecoverRepublishesLostJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.q.fail = true // saved, but the publish is lost
	a := b.send(t, notify.Request{UserID: "u1", Type: "otp", Channels: []notify.Channel{notify.Email}})
	b.q.fail = false
	if n, err := b.svc.Recover(t.Context(), 100); err != nil || n != 0 {
		t.Fatalf("Recover at once = %d, %v; want 0 (not yet past RecoveryAfter)", n, err)
	}
	b.clock.Advance(b.svc.RecoveryAfter() + time.Second)
	if n, err := b.svc.Recover(t.Context(), 100); err != nil || n != 1 {
		t.Fatalf("Recover after RecoveryAfter = %d, %v; want 1", n, err)
	}
	b.drain(t)
	if d := b.statuses(t, a.NotificationID)[notify.Email]; d.Status != notify.StatusSent {
		t.Errorf("after recovery: %s, want sent", d.Status)
	}
	b.clock.Advance(time.Hour)
	if n, _ := b.svc.Recover(t.Context(), 100); n != 0 {
		t.Errorf("Recover after the delivery went out = %d, want 0", n)
	}
}

func TestPurgeHistory(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *notify.Options) { o.History = 24 * time.Hour })
	old := b.send(t, notify.Request{UserID: "u1", Type: "otp"})
	b.clock.Advance(25 * time.Hour)
	recent := b.send(t, notify.Request{UserID: "u1", Type: "otp"})
	if n, err := b.svc.PurgeHistory(t.Context(), 1); err != nil || n != 1 {
		t.Fatalf("PurgeHistory = %d, %v; want 1", n, err)
	}
	if _, err := b.svc.Notification(t.Context(), old.NotificationID); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("old notification after purge: %v, want NotFound", err)
	}
	if _, err := b.svc.Notification(t.Context(), recent.NotificationID); err != nil {
		t.Errorf("recent notification after purge: %v", err)
	}
}

// TestProcessReadsStateUnlessFresh: the first run of a job this node
// published skips the state read, but a job redelivered by the queue, or
// run by another node, reads the store and is not sent again.
func TestProcessReadsStateUnlessFresh(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.send(t, notify.Request{UserID: "u1", Type: "order.shipped", Data: json.RawMessage(`{"order":"#42","name":"Ann"}`),
		Channels: []notify.Channel{notify.Email}})
	jobs := b.q.take()
	if len(jobs) != 1 {
		t.Fatalf("jobs = %+v, want one", jobs)
	}
	// Another node (a second Service on the same store) runs the job first.
	other := notify.NewService(notify.Options{Store: b.db, Queue: &recQueue{}, Now: b.clock.Now,
		Providers: map[notify.Channel]notify.Provider{notify.Email: b.prov}})
	if err := other.Process(t.Context(), jobs[0]); err != nil {
		t.Fatal(err)
	}
	// The queue hands the same message to this node again (the other
	// node's acknowledgement was lost).
	again := jobs[0]
	again.Redelivered = true
	if err := b.svc.Process(t.Context(), again); err != nil {
		t.Fatal(err)
	}
	if calls, _ := b.prov.count(); calls != 1 {
		t.Errorf("provider called %d times, want 1: a redelivered job must read the delivery's state", calls)
	}
	if d := b.statuses(t, a.NotificationID)[notify.Email]; d.Status != notify.StatusSent || d.Attempts != 1 {
		t.Errorf("delivery = %s after %d attempts, want sent after 1", d.Status, d.Attempts)
	}
}
