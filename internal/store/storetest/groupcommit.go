package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
)

// groupCommitFailure runs good and failing writes at once, so failing ones
// share transactions with good ones: a failing write must get its own
// error (Conflict here) and write nothing, and its neighbours must commit
// with their own results. On PostgreSQL these writes are pipelined, and a
// failure rolls back the whole pipelined transaction first.
func (s suite) groupCommitFailure(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	const n = 200
	// Every FinishAttempt below moves a delivery of its own; the failing
	// ones add a dead letter with an id that is taken.
	for i := range n {
		if i%4 >= 2 {
			no, ds := newNotification(fmt.Sprintf("f%03d", i), "", "u2", t0, notify.Email)
			mustCreate(t, db, no, ds)
		}
	}
	taken := &notify.DeadLetter{ID: "dl_taken", NotificationID: "f002", Channel: notify.Email, UserID: "u2", Error: "gone", Attempts: 1, CreatedAt: t0}
	dead := notify.Attempt{Key: notify.DeliveryKey{NotificationID: "f002", Channel: notify.Email}, Status: notify.StatusDead, Attempts: 1, Error: "gone", At: t0}
	if ok, err := db.FinishAttempt(ctx, dead, taken); err != nil || !ok {
		t.Fatalf("FinishAttempt(dead) = %v, %v", ok, err)
	}

	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			switch id := fmt.Sprintf("%03d", i); i % 4 {
			case 0: // a new notification
				no, ds := newNotification("g"+id, "", "u1", t0, notify.Email, notify.SMS)
				if _, created, err := db.CreateNotification(ctx, no, ds); err != nil || !created {
					t.Errorf("CreateNotification(g%s) = %v, %v; want created", id, created, err)
				}
			case 1: // two deliveries on one channel
				no, ds := newNotification("b"+id, "", "u1", t0, notify.Email, notify.Email)
				if _, _, err := db.CreateNotification(ctx, no, ds); !apperr.Is(err, apperr.Conflict) {
					t.Errorf("CreateNotification(b%s with a repeated channel) = %v, want Conflict", id, err)
				}
			case 2: // sent, with its outbox entry
				if i == 2 {
					return // f002 is dead already
				}
				a := notify.Attempt{Key: notify.DeliveryKey{NotificationID: "f" + id, Channel: notify.Email}, Status: notify.StatusSent, Attempts: 1, At: t0,
					Outbox: &notify.OutboxEntry{NotificationID: "f" + id, Channel: notify.Email, Attempt: 1, UserID: "u2", To: "u2", Body: "b", CreatedAt: t0}}
				if ok, err := db.FinishAttempt(ctx, a, nil); err != nil || !ok {
					t.Errorf("FinishAttempt(f%s sent) = %v, %v; want ok", id, ok, err)
				}
			case 3: // dead, with a dead letter whose id is taken
				a := notify.Attempt{Key: notify.DeliveryKey{NotificationID: "f" + id, Channel: notify.Email}, Status: notify.StatusDead, Attempts: 1, Error: "gone", At: t0}
				dl := *taken
				dl.NotificationID = "f" + id
				if _, err := db.FinishAttempt(ctx, a, &dl); !apperr.Is(err, apperr.Conflict) {
					t.Errorf("FinishAttempt(f%s with a taken dead letter id) = %v, want Conflict", id, err)
				}
			}
		})
	}
	wg.Wait()

	for i := range n {
		id := fmt.Sprintf("%03d", i)
		switch i % 4 {
		case 0:
			if rec, err := db.Notification(ctx, "g"+id); err != nil || len(rec.Deliveries) != 2 {
				t.Errorf("Notification(g%s) = %+v, %v; want it with 2 deliveries", id, rec, err)
			}
		case 1:
			if _, err := db.Notification(ctx, "b"+id); !apperr.Is(err, apperr.NotFound) {
				t.Errorf("Notification(b%s) = %v, want NotFound: nothing of a failed write is kept", id, err)
			}
		case 2, 3:
			want, wantEntries := notify.StatusSent, 1
			if i%4 == 3 {
				want, wantEntries = notify.StatusQueued, 0
			}
			if i == 2 {
				want, wantEntries = notify.StatusDead, 0
			}
			d, err := db.Delivery(ctx, notify.DeliveryKey{NotificationID: "f" + id, Channel: notify.Email})
			if err != nil || d.Status != want {
				t.Errorf("Delivery(f%s) = %+v, %v; want %s", id, d, err, want)
			}
			es, err := db.OutboxEntries(ctx, notify.OutboxFilter{NotificationID: "f" + id}, notify.Cursor{}, 10)
			if err != nil || len(es) != wantEntries {
				t.Errorf("OutboxEntries(f%s) = %+v, %v; want %d", id, es, err, wantEntries)
			}
		}
	}
	if dls, err := db.DeadLetters(ctx, notify.Cursor{}, 10); err != nil || len(dls) != 1 || dls[0].NotificationID != "f002" {
		t.Errorf("DeadLetters = %+v, %v; want only the first dl_taken", dls, err)
	}
	if db.Dialect() == store.DialectPostgres && db.BatchStats().PipelinedBatches() == 0 {
		t.Errorf("no group commit ran pipelined on PostgreSQL")
	}
}

// checkPipelined fails when, on PostgreSQL, one of db's group commits did
// not run pipelined (see the store's pipeline.go). The tests that call it
// write only through methods with a pipelined form and never fail on
// purpose: a batch that fell back to one transaction per write means
// PostgreSQL rejected a pipelined statement, which the fallback would
// otherwise hide behind correct results.
func checkPipelined(t *testing.T, db *store.DB) {
	t.Helper()
	if db.Dialect() != store.DialectPostgres {
		return
	}
	st := db.BatchStats()
	batches, _, _ := st.Snapshot()
	if p := st.PipelinedBatches(); p != batches {
		t.Errorf("%d of %d group commits pipelined, want all", p, batches)
	}
}

// checkSomePipelined is checkPipelined for concurrent writers of the same
// request ids: on several PostgreSQL connections their transactions can
// deadlock, the server aborts one, and its writes run again one
// transaction each (each counted as a group commit). A statement the
// server rejects fails every batch, so some must still be pipelined.
func checkSomePipelined(t *testing.T, db *store.DB) {
	t.Helper()
	if db.Dialect() != store.DialectPostgres {
		return
	}
	if p := db.BatchStats().PipelinedBatches(); p == 0 {
		t.Errorf("no group commit pipelined")
	}
}
