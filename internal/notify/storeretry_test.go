package notify_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/store"
)

// pgOutage is how long the PostgreSQL restarts below keep the server down:
// a fault's length, not a wait for a condition.
const pgOutage = time.Second

// TestSendRidesOutAPostgresRestart restarts a private PostgreSQL under
// Send: a notification posted while the server is down is accepted once it
// is back within the request's retry window (Options.StoreRetry), saved
// once; one whose window ends first fails with the store's transient
// Unavailable error (503 with Retry-After at the edge) after retrying for
// the whole window, having saved nothing, and the client's retry with the
// same request_id is then accepted, once.
func TestSendRidesOutAPostgresRestart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := enginetest.StartPostgres(t)
	db, err := store.Open(ctx, store.Options{URL: pg.URL(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	prov := &scripted{name: "scripted"}
	service := func(retry time.Duration) *notify.Service {
		// A fresh service for each case: nothing cached, so every read
		// Send makes (settings, rules) goes to the store too.
		return notify.NewService(notify.Options{Store: db, Queue: &recQueue{}, StoreRetry: retry,
			Providers: map[notify.Channel]notify.Provider{notify.Email: prov, notify.SMS: prov, notify.Push: prov, notify.Webhook: prov}})
	}
	saved := func(t *testing.T, user string) []notify.Record {
		t.Helper()
		recs, err := db.UserNotifications(ctx, user, time.Now().Add(-time.Hour), notify.Cursor{}, 10)
		if err != nil {
			t.Fatalf("UserNotifications(%s): %v", user, err)
		}
		return recs
	}
	type answer struct {
		a   notify.Accepted
		err error
	}

	t.Run("back within the window", func(t *testing.T) {
		// 10 s rather than the default 4 s, so that a restart slowed by
		// a loaded machine stays inside the window.
		svc := service(10 * time.Second)
		r := enginetest.AcrossOutage(t, pg, pgOutage, "Send", func() answer {
			a, err := svc.Send(ctx, notify.Request{RequestID: "r-within", UserID: "u-within", Type: "otp", Data: []byte(`{"code":"1"}`)})
			return answer{a, err}
		})
		if r.err != nil || r.a.NotificationID == "" || r.a.Duplicate {
			t.Fatalf("Send across the restart = %+v, %v; want accepted", r.a, r.err)
		}
		if recs := saved(t, "u-within"); len(recs) != 1 || recs[0].ID != r.a.NotificationID {
			t.Errorf("saved %d notifications for the request (%+v), want 1, %s", len(recs), recs, r.a.NotificationID)
		}
	})

	t.Run("down past the window", func(t *testing.T) {
		const window = time.Second
		svc := service(window)
		req := notify.Request{RequestID: "r-past", UserID: "u-past", Type: "otp", Data: []byte(`{"code":"2"}`)}
		pg.Stop()
		start := time.Now()
		a, err := svc.Send(ctx, req)
		took := time.Since(start)
		pg.Start()
		if !apperr.Is(err, apperr.Unavailable) || !apperr.IsTransient(err) {
			t.Fatalf("Send with PostgreSQL down = %+v, %v; want a transient Unavailable error", a, err)
		}
		// The last pause starts within the window and ends before it
		// closes (at most 500 ms): the retries filled more than half.
		if took < window/2 || took > window+10*time.Second {
			t.Errorf("Send gave up after %v, want about the %v window", took, window)
		}
		if recs := saved(t, "u-past"); len(recs) != 0 {
			t.Errorf("a refused request saved %d notifications", len(recs))
		}
		again, err := svc.Send(ctx, req)
		if err != nil || again.Duplicate {
			t.Fatalf("the client's retry after the restart = %+v, %v; want accepted", again, err)
		}
		if recs := saved(t, "u-past"); len(recs) != 1 || recs[0].ID != again.NotificationID {
			t.Errorf("saved %d notifications after the retry, want 1, %s", len(recs), again.NotificationID)
		}
	})

	t.Run("a cancelled request stops retrying", func(t *testing.T) {
		svc := service(10 * time.Second)
		pg.Stop()
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := svc.Send(cctx, notify.Request{UserID: "u-cancel", Type: "otp"})
		took := time.Since(start)
		pg.Start()
		if err == nil || took > 5*time.Second {
			t.Errorf("Send under a 300 ms deadline with PostgreSQL down = %v after %v; want an error at about the deadline, not the 10 s window", err, took)
		}
	})
}
