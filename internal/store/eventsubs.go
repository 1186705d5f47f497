package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/events"
	"github.com/sluicehq/sluice/internal/notify"
)

var _ events.Store = (*DB)(nil)

// eventSubColumns is the column list every event_subscriptions read
// selects, in scanEventSub's order.
const eventSubColumns = `id, url, events, secret, disable_after, disable_after_failures, created_at, failures,
	first_failure_at, last_failure_at, last_error, last_success_at, disabled_at, disabled_reason`

// CreateEventSubscription implements events.Store.
func (db *DB) CreateEventSubscription(ctx context.Context, s events.Subscription) error {
	js, err := json.Marshal(s.Events)
	if err != nil {
		return fmt.Errorf("encode event types: %w", err)
	}
	_, err = db.exec(ctx, `INSERT INTO event_subscriptions (id, url, events, secret, disable_after, disable_after_failures, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.URL, string(js), s.Secret, s.DisableAfter.Microseconds(), s.DisableAfterFailures, s.CreatedAt.UnixMicro())
	return mapErr(err, "create event subscription")
}

// EventSubscription implements events.Store.
func (db *DB) EventSubscription(ctx context.Context, id string) (events.Subscription, error) {
	return eventSubOrNotFound(db.queryRow(ctx, `SELECT `+eventSubColumns+` FROM event_subscriptions WHERE id = ?`, id), id, "get")
}

// EventSubscriptions implements events.Store.
func (db *DB) EventSubscriptions(ctx context.Context) ([]events.Subscription, error) {
	rows, err := db.query(ctx, `SELECT `+eventSubColumns+` FROM event_subscriptions ORDER BY created_at, id`)
	if err != nil {
		return nil, mapErr(err, "list event subscriptions")
	}
	return appendRows([]events.Subscription{}, rows, "list event subscriptions", scanEventSub)
}

// DeleteEventSubscription implements events.Store.
func (db *DB) DeleteEventSubscription(ctx context.Context, id string) error {
	res, err := db.exec(ctx, `DELETE FROM event_subscriptions WHERE id = ?`, id)
	if err != nil {
		return mapErr(err, "delete event subscription")
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return cmpErr(err, apperr.New(apperr.NotFound, "event subscription %q not found", id))
	}
	return nil
}

// RecordEventAttempt implements events.Store, in one statement, so
// concurrent attempts each count.
func (db *DB) RecordEventAttempt(ctx context.Context, id string, ok bool, errMsg string, at time.Time) (events.Subscription, error) {
	q := `UPDATE event_subscriptions SET failures = 0, first_failure_at = NULL, last_success_at = ? WHERE id = ?`
	args := []any{at.UnixMicro(), id}
	if !ok {
		q = `UPDATE event_subscriptions SET failures = failures + 1, first_failure_at = COALESCE(first_failure_at, ?),
			last_failure_at = ?, last_error = ? WHERE id = ?`
		args = []any{at.UnixMicro(), at.UnixMicro(), errMsg, id}
	}
	row := db.write.QueryRowContext(ctx, db.Rebind(q+` RETURNING `+eventSubColumns), args...)
	return eventSubOrNotFound(row, id, "record attempt of")
}

// DisableEventSubscription implements events.Store.
func (db *DB) DisableEventSubscription(ctx context.Context, id, reason string, at time.Time) error {
	_, err := db.exec(ctx, `UPDATE event_subscriptions SET disabled_at = ?, disabled_reason = ? WHERE id = ? AND disabled_at IS NULL`,
		at.UnixMicro(), reason, id)
	return mapErr(err, "disable event subscription")
}

// EnableEventSubscription implements events.Store.
func (db *DB) EnableEventSubscription(ctx context.Context, id string) (events.Subscription, error) {
	row := db.write.QueryRowContext(ctx, db.Rebind(`UPDATE event_subscriptions SET disabled_at = NULL, disabled_reason = '',
		failures = 0, first_failure_at = NULL WHERE id = ? RETURNING `+eventSubColumns), id)
	return eventSubOrNotFound(row, id, "enable")
}

// appendEventQuery adds an event to the log; an id logged already adds
// nothing (a group-committed write must not fail on purpose).
const appendEventQuery = `INSERT INTO event_log (id, type, data, at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`

// AppendEvent implements events.Store, group-committed with the writes
// of the notification pipeline (whose status changes the events report):
// one commit serves many events instead of one fsync each.
func (db *DB) AppendEvent(ctx context.Context, e events.Event) error {
	args := []any{e.ID, e.Type, string(e.Data), e.At.UnixMicro()}
	added, err := db.writeChanged(ctx, false, appendEventQuery, args)
	if err != nil {
		return mapErr(err, "append event")
	}
	if !added {
		return apperr.New(apperr.Conflict, "event %s is logged already", e.ID)
	}
	return nil
}

// EventsSince implements events.Store.
func (db *DB) EventsSince(ctx context.Context, since time.Time, afterID string, limit int) ([]events.Event, error) {
	at := since.UnixMicro()
	return db.scanEvents(ctx, "list events", `SELECT id, type, data, at FROM event_log WHERE at > ? OR (at = ? AND id > ?)
		ORDER BY at, id LIMIT ?`, at, at, afterID, limit)
}

// scanEvents runs q, which selects id, type, data and at of event_log
// rows, and reads them.
func (db *DB) scanEvents(ctx context.Context, op, q string, args ...any) ([]events.Event, error) {
	rows, err := db.query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err, op)
	}
	return appendRows([]events.Event{}, rows, op, func(row rowScanner) (e events.Event, err error) {
		var (
			data string
			us   int64
		)
		err = row.Scan(&e.ID, &e.Type, &data, &us)
		e.Data, e.At = json.RawMessage(data), time.UnixMicro(us).UTC()
		return e, err
	})
}

// receivedDelivery is the condition on a delivery d that counts its event
// as received by the subscription, or about to be: sent or delivered, or
// queued or sending without a failed attempt yet. A delivery retrying
// after a failure (it may wait long, and the endpoint was down) does not
// count: UndeliveredEvents returns its event.
const receivedDelivery = `(d.status IN ('sent', 'delivered') OR (d.status IN ('queued', 'sending') AND d.attempts = 0))`

// UndeliveredEvents implements events.Store. An event's first system
// notification (request id evt:<event>:<subscription>) is found through
// the unique index on request_id, one lookup per event read; the
// notifications earlier recovers queued (evt:<event>:<subscription>:<run>)
// cannot be reached by equality, so they are read once per call, among
// the subscription's notifications created since since, and left out
// here.
func (db *DB) UndeliveredEvents(ctx context.Context, subID string, types []string, since time.Time, afterID string, limit int) ([]events.Event, error) {
	if len(types) == 0 || limit <= 0 {
		return []events.Event{}, nil
	}
	recovered, err := db.recoveredEvents(ctx, subID, since)
	if err != nil {
		return nil, err
	}
	q := `SELECT e.id, e.type, e.data, e.at FROM event_log e
		WHERE (e.at > ? OR (e.at = ? AND e.id > ?)) AND e.type IN (` + marks(len(types)) + `)
		AND NOT EXISTS (SELECT 1 FROM notifications n JOIN deliveries d ON d.notification_id = n.id
			WHERE n.request_id = 'evt:' || e.id || ':' || CAST(? AS TEXT) AND ` + receivedDelivery + `)
		ORDER BY e.at, e.id LIMIT ?`
	out := []events.Event{}
	at := since.UnixMicro()
	for len(out) < limit {
		args := []any{at, at, afterID}
		for _, t := range types {
			args = append(args, t)
		}
		page, err := db.scanEvents(ctx, "list undelivered events", q, append(args, subID, limit)...)
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			if !recovered[e.ID] && len(out) < limit {
				out = append(out, e)
			}
		}
		if len(page) < limit {
			break
		}
		last := page[len(page)-1]
		at, afterID = last.At.UnixMicro(), last.ID
	}
	return out, nil
}

// recoveredEvents returns the ids of the events whose notification to
// subscription subID queued by a recover (request id
// evt:<event>:<subscription>:<run>), created since since (a minute
// before, for the clocks of other nodes), was received or is on its way.
func (db *DB) recoveredEvents(ctx context.Context, subID string, since time.Time) (map[string]bool, error) {
	rows, err := db.query(ctx, `SELECT n.request_id FROM notifications n JOIN deliveries d ON d.notification_id = n.id
		WHERE n.user_id = ? AND n.created_at >= ? AND n.request_id LIKE ? AND `+receivedDelivery,
		notify.SystemUserPrefix+subID, since.Add(-time.Minute).UnixMicro(), "evt:%:"+subID+":%")
	if err != nil {
		return nil, mapErr(err, "list recovered events")
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var reqID string
		if err := rows.Scan(&reqID); err != nil {
			return nil, mapErr(err, "list recovered events")
		}
		// LIKE is broader than the form ("_" matches any character, and
		// SQLite ignores case): keep the ids of that exact form only.
		event, rest, ok := strings.Cut(strings.TrimPrefix(reqID, "evt:"), ":")
		if ok && strings.HasPrefix(reqID, "evt:") && strings.HasPrefix(rest, subID+":") {
			out[event] = true
		}
	}
	return out, mapErr(rows.Err(), "list recovered events")
}

// DeleteEventsBefore implements events.Store.
func (db *DB) DeleteEventsBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	res, err := db.backgroundExec(ctx, `DELETE FROM event_log WHERE id IN (SELECT id FROM event_log WHERE at < ? ORDER BY at LIMIT ?)`,
		t.UnixMicro(), limit)
	if err != nil {
		return 0, mapErr(err, "purge events")
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(err, "purge events")
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return mapErr(err, "event subscription")
	}
	return otherwise
}

func eventSubOrNotFound(row interface{ Scan(...any) error }, id, op string) (events.Subscription, error) {
	s, err := scanEventSub(row)
	if errors.Is(err, sql.ErrNoRows) {
		return events.Subscription{}, apperr.New(apperr.NotFound, "event subscription %q not found", id)
	}
	if err != nil {
		return events.Subscription{}, mapErr(err, op+" event subscription")
	}
	return s, nil
}

// scanEventSub reads one row selected with eventSubColumns.
func scanEventSub(row interface{ Scan(...any) error }) (events.Subscription, error) {
	var (
		s                                     events.Subscription
		types                                 string
		disableAfter, created                 int64
		firstFail, lastFail, lastOK, disabled *int64
	)
	if err := row.Scan(&s.ID, &s.URL, &types, &s.Secret, &disableAfter, &s.DisableAfterFailures, &created, &s.Failures,
		&firstFail, &lastFail, &s.LastError, &lastOK, &disabled, &s.DisabledReason); err != nil {
		return events.Subscription{}, err
	}
	if err := json.Unmarshal([]byte(types), &s.Events); err != nil {
		return events.Subscription{}, fmt.Errorf("decode event types of subscription %q: %w", s.ID, err)
	}
	s.DisableAfter = time.Duration(disableAfter) * time.Microsecond
	s.CreatedAt = fromMicros(&created)
	s.FirstFailureAt, s.LastFailureAt = fromMicros(firstFail), fromMicros(lastFail)
	s.LastSuccessAt, s.DisabledAt = fromMicros(lastOK), fromMicros(disabled)
	return s, nil
}
