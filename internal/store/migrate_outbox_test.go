package store

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// TestOutboxMovesIntoDeliveries checks migration 0027 on both engines:
// the outbox entries stored in their own table before it end up in their
// deliveries, the latest attempt's when an older release stored one per
// attempt, and the listing still finds them newest first; a delivery
// without an entry is not listed.
func TestOutboxMovesIntoDeliveries(t *testing.T) {
	t.Parallel()
	onEachEngineThrough(t, "0026_click_series", func(t *testing.T, db *DB, _ string) {
		ctx := t.Context()
		t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		for i, id := range []string{"n1", "n2"} {
			created := t0.Add(time.Duration(i) * time.Second)
			n := notify.Notification{ID: id, RequestHash: "h-" + id, UserID: "u1", Type: "order.shipped", Category: notify.Orders,
				Data: json.RawMessage(`{}`), Channels: []notify.Channel{notify.Email, notify.SMS}, ExpiresAt: created.Add(time.Hour), CreatedAt: created}
			var ds []notify.Delivery
			for _, ch := range n.Channels {
				ds = append(ds, notify.Delivery{NotificationID: id, Channel: ch, UserID: "u1", Category: notify.Orders, Provider: "outbox",
					Status: notify.StatusSent, Attempts: 1, ExpiresAt: n.ExpiresAt, CreatedAt: created, UpdatedAt: created})
			}
			if _, ok, err := db.CreateNotification(ctx, n, ds); err != nil || !ok {
				t.Fatalf("CreateNotification(%s) = %v, %v", id, ok, err)
			}
		}
		// n1's email has two attempts' entries, its SMS one; n2's email
		// one, its SMS none.
		for _, e := range []struct {
			id, ch, body string
			attempt      int
			at           time.Time
		}{
			{"n1", "email", "first try", 1, t0},
			{"n1", "email", "second try", 2, t0.Add(3 * time.Second)},
			{"n1", "sms", "text", 1, t0.Add(time.Second)},
			{"n2", "email", "hello", 1, t0.Add(2 * time.Second)},
		} {
			if _, err := db.exec(ctx, `INSERT INTO outbox (notification_id, channel, attempt, user_id, recipient, subject, body, created_at, html)
				VALUES (?, ?, ?, 'u1', 'ann@example.com', 'subject', ?, ?, '<p>html</p>')`, e.id, e.ch, e.attempt, e.body, e.at.UnixMicro()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		got, err := db.OutboxEntries(ctx, notify.OutboxFilter{}, notify.Cursor{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"n1:email:2 second try", "n2:email:1 hello", "n1:sms:1 text"}
		if len(got) != len(want) {
			t.Fatalf("OutboxEntries after 0027 = %+v, want %v", got, want)
		}
		for i, e := range got {
			if s := e.CursorID() + " " + e.Body; s != want[i] || e.To != "ann@example.com" || e.Subject != "subject" || e.HTML != "<p>html</p>" || e.UserID != "u1" {
				t.Errorf("entry %d = %+v, want %s", i, e, want[i])
			}
		}
		if !got[0].CreatedAt.Equal(t0.Add(3 * time.Second)) {
			t.Errorf("latest entry's time = %v, want %v", got[0].CreatedAt, t0.Add(3*time.Second))
		}
	})
}
