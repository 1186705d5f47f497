package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

var _ notify.Store = (*DB)(nil)

const (
	notificationColumns = "id, request_id, request_hash, user_id, type, category, data, channels, expires_at, created_at"
	deliveryColumns     = "notification_id, channel, user_id, category, provider, status, attempts, error, next_attempt_at, expires_at, created_at, updated_at"
	// deliveryReadColumns are deliveryColumns and what attempts add later.
	deliveryReadColumns = deliveryColumns + ", provider_message_id, hops, claim_until"
	// jobColumns select a delivery joined with its notification (d, n).
	jobColumns = "d.notification_id, d.channel, d.user_id, n.type, d.category, n.data, n.expires_at, n.created_at, d.attempts, d.next_attempt_at"
)

// notificationArgs is n's row, the arguments of insertNotificationQuery.
func notificationArgs(n notify.Notification) []any {
	chs := make([]string, len(n.Channels))
	for i, ch := range n.Channels {
		chs[i] = string(ch)
	}
	chJSON, _ := json.Marshal(chs)
	var reqID any
	if n.RequestID != "" {
		reqID = n.RequestID
	}
	return []any{n.ID, reqID, n.RequestHash, n.UserID, n.Type, string(n.Category),
		string(n.Data), string(chJSON), toMicros(n.ExpiresAt), toMicros(n.CreatedAt)}
}

// CreateNotification implements notify.Store, group-committed.
func (db *DB) CreateNotification(ctx context.Context, n notify.Notification, ds []notify.Delivery) (notify.Notification, bool, error) {
	nArgs := notificationArgs(n)
	insertN, err := db.writeStmt(ctx, db.Rebind(insertNotificationQuery))
	if err != nil {
		return notify.Notification{}, false, err
	}
	var (
		insertD stmt
		dArgs   []any
	)
	if len(ds) > 0 { // an INSERT with no rows is not a statement
		var dValues string
		dValues, dArgs = deliveryValues(ds, deliveryRow)
		if insertD, err = db.writeStmt(ctx, db.Rebind(`INSERT INTO deliveries (`+deliveryColumns+`) VALUES `+dValues)); err != nil {
			return notify.Notification{}, false, err
		}
	}
	var (
		existing notify.Notification
		created  bool
		// taken: the pipelined form found the request_id taken, and
		// reads the notification that holds it after the commit.
		taken bool
	)
	fn := func(ctx context.Context, tx *sql.Tx) error {
		existing, created, taken = notify.Notification{}, false, false
		res, err := insertN.exec(ctx, tx, nArgs...)
		if err != nil {
			return err
		}
		var inserted bool
		if existing, created, inserted, err = db.readInsert(ctx, tx, n, res); err != nil || !inserted {
			return err
		}
		if len(ds) > 0 {
			_, err = insertD.exec(ctx, tx, dArgs...)
		}
		return err
	}
	var pg pgWrite
	if db.dialect == DialectPostgres {
		q, args := db.createNotificationPipelined(nArgs, ds)
		pg = pgCount(q, args, func(inserted int64) {
			existing, created, taken = notify.Notification{}, inserted > 0, inserted == 0
		})
	}
	if err := db.pipelinedBatch(ctx, n.Category.Urgent(), fn, pg); err != nil {
		return notify.Notification{}, false, mapErr(err, "create notification")
	}
	if taken {
		// ON CONFLICT waited for the transaction that took the request_id
		// (or the id) to commit, so its notification can be read now.
		q, arg := takenQuery(n)
		existing, err = scanNotification(db.queryRow(ctx, q, arg))
		if err != nil {
			return notify.Notification{}, false, mapErr(err, "create notification")
		}
		existing, created = takenBy(n, existing)
	}
	return existing, created, nil
}

// takenQuery returns the query (with ? placeholders) and its argument that
// read the notification that made n's INSERT ... ON CONFLICT DO NOTHING
// insert nothing: the one holding n.RequestID, or, when n has none, the one
// holding n.ID.
func takenQuery(n notify.Notification) (string, any) {
	if n.RequestID != "" {
		return `SELECT ` + notificationColumns + ` FROM notifications WHERE request_id = ?`, n.RequestID
	}
	return `SELECT ` + notificationColumns + ` FROM notifications WHERE id = ?`, n.ID
}

// takenBy reports what a create of n that inserted nothing means, from
// existing, the notification that took n's request_id or id. Another
// notification: n is a repeat of it (existing, false). n itself: this call
// is a retry of one whose transaction committed although its caller got an
// error (the connection dropped before COMMIT's answer arrived; see
// notify.Store.CreateNotification), so n and its deliveries are stored, by
// that attempt, and the create is reported done (created, true) exactly
// once: ids are random, so no other request saves a notification with n's.
func takenBy(n, existing notify.Notification) (notify.Notification, bool) {
	if existing.ID == n.ID {
		return notify.Notification{}, true
	}
	return existing, false
}

// readInsert reads res, the result of n's INSERT ... ON CONFLICT DO
// NOTHING in tx: inserted when n went in (then created too), else the
// notification that holds its place and created as takenBy says.
func (db *DB) readInsert(ctx context.Context, tx *sql.Tx, n notify.Notification, res sql.Result) (existing notify.Notification, created, inserted bool, err error) {
	rows, err := res.RowsAffected()
	if err != nil {
		return notify.Notification{}, false, false, err
	}
	if rows > 0 {
		return notify.Notification{}, true, true, nil
	}
	q, arg := takenQuery(n)
	existing, err = scanNotification(tx.QueryRowContext(ctx, db.Rebind(q), arg))
	existing, created = takenBy(n, existing)
	return existing, created, false, err
}

// Rows of deliveryColumns in a VALUES list. Outside an INSERT's own VALUES
// PostgreSQL cannot infer a parameter's type from its column, so the typed
// row names them (see migrations/postgres/0002_notifications.sql).
const (
	deliveryRow      = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
	deliveryRowTyped = "(?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::bigint, ?::text, ?::bigint, ?::bigint, ?::bigint, ?::bigint)"
)

// deliveryValues returns ds as VALUES rows written as row, and their
// arguments.
func deliveryValues(ds []notify.Delivery, row string) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 12*len(ds))
	for i, d := range ds {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
		args = append(args, d.NotificationID, string(d.Channel), d.UserID, string(d.Category), d.Provider,
			string(d.Status), d.Attempts, d.Error, toMicros(d.NextAttemptAt), toMicros(d.ExpiresAt),
			toMicros(d.CreatedAt), toMicros(d.UpdatedAt))
	}
	return b.String(), args
}

// NotificationByRequestID implements notify.Store.
func (db *DB) NotificationByRequestID(ctx context.Context, requestID string) (notify.Notification, error) {
	n, err := scanNotification(db.queryRow(ctx, `SELECT `+notificationColumns+` FROM notifications WHERE request_id = ?`, requestID))
	if errNoRows(err) {
		return n, apperr.New(apperr.NotFound, "no notification with request_id %q", requestID)
	}
	return n, mapErr(err, "get notification by request id")
}

// Notification implements notify.Store.
func (db *DB) Notification(ctx context.Context, id string) (notify.Record, error) {
	n, err := scanNotification(db.queryRow(ctx, `SELECT `+notificationColumns+` FROM notifications WHERE id = ?`, id))
	if errNoRows(err) {
		return notify.Record{}, apperr.New(apperr.NotFound, "notification %q not found", id)
	}
	if err != nil {
		return notify.Record{}, mapErr(err, "get notification")
	}
	ds, err := db.deliveriesOf(ctx, []string{id})
	if err != nil {
		return notify.Record{}, err
	}
	return notify.Record{Notification: n, Deliveries: ds[id]}, nil
}

// UserNotifications implements notify.Store.
func (db *DB) UserNotifications(ctx context.Context, user string, since time.Time, after notify.Cursor, limit int) ([]notify.Record, error) {
	q := `SELECT ` + notificationColumns + ` FROM notifications WHERE user_id = ? AND created_at >= ?`
	args := []any{user, since.UnixMicro()}
	if !after.IsZero() {
		q += ` AND (created_at < ? OR (created_at = ? AND id < ?))`
		args = append(args, after.At.UnixMicro(), after.At.UnixMicro(), after.ID)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := db.query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err, "list notifications")
	}
	defer rows.Close()
	out := []notify.Record{}
	var ids []string
	for rows.Next() {
		n, err := scanNotification(rows)
		if err != nil {
			return nil, mapErr(err, "list notifications")
		}
		out = append(out, notify.Record{Notification: n})
		ids = append(ids, n.ID)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "list notifications")
	}
	ds, err := db.deliveriesOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Deliveries = ds[out[i].ID]
	}
	return out, nil
}

// deliveriesOf returns the deliveries of the given notifications, in
// channel order.
func (db *DB) deliveriesOf(ctx context.Context, ids []string) (map[string][]notify.Delivery, error) {
	out := map[string][]notify.Delivery{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := db.query(ctx, `SELECT `+deliveryReadColumns+` FROM deliveries WHERE notification_id IN (`+placeholders(len(ids))+`)`, args...)
	if err != nil {
		return nil, mapErr(err, "list deliveries")
	}
	defer rows.Close()
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, mapErr(err, "list deliveries")
		}
		out[d.NotificationID] = append(out[d.NotificationID], d)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "list deliveries")
	}
	for id, ds := range out {
		sortDeliveries(ds)
		out[id] = ds
	}
	return out, nil
}

func sortDeliveries(ds []notify.Delivery) {
	order := func(ch notify.Channel) int {
		for i, c := range notify.Channels {
			if c == ch {
				return i
			}
		}
		return len(notify.Channels)
	}
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && order(ds[j].Channel) < order(ds[j-1].Channel); j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// Delivery implements notify.Store.
func (db *DB) Delivery(ctx context.Context, key notify.DeliveryKey) (notify.Delivery, error) {
	d, err := scanDelivery(db.queryRow(ctx, `SELECT `+deliveryReadColumns+` FROM deliveries WHERE notification_id = ? AND channel = ?`,
		key.NotificationID, string(key.Channel)))
	if errNoRows(err) {
		return d, apperr.New(apperr.NotFound, "delivery %s not found", key)
	}
	return d, mapErr(err, "get delivery")
}

// FinishAttempt implements notify.Store, group-committed.
func (db *DB) FinishAttempt(ctx context.Context, a notify.Attempt, dl *notify.DeadLetter) (bool, error) {
	update, err := db.writeStmt(ctx, db.Rebind(finishAttemptUpdate))
	if err != nil {
		return false, err
	}
	hops, err := encodeHops(a.Hops)
	if err != nil {
		return false, err
	}
	uArgs := []any{string(a.Status), a.Attempts, a.Error, toMicros(a.NextAttemptAt), toMicros(a.At),
		a.Provider, a.Provider, a.ProviderMessageID, hops}
	uArgs = append(uArgs, outboxArgs(a.Outbox)...)
	uArgs = append(uArgs, a.Key.NotificationID, string(a.Key.Channel), a.Prev, a.Claim)
	insertDL := db.Rebind(`INSERT INTO dead_letters (` + deadLetterColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	ib, err := db.newInboxWrite(ctx, a.Inbox)
	if err != nil {
		return false, err
	}
	var ok bool
	fn := func(ctx context.Context, tx *sql.Tx) error {
		ok = false
		if ib != nil {
			ib.e.Seq = 0
		}
		res, err := update.exec(ctx, tx, uArgs...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		ok = true
		if ib != nil {
			if err := ib.exec(ctx, tx, a.Key); err != nil {
				return err
			}
		}
		if dl != nil {
			_, err = tx.ExecContext(ctx, insertDL, deadLetterArgs(dl)...)
		}
		return err
	}
	var pg pgWrite
	if db.dialect == DialectPostgres {
		q, args := db.finishAttemptPipelined(uArgs, ib, dl)
		set := func(updated int64) { ok = updated > 0 }
		pg = pgCount(q, args, set)
		if ib != nil {
			pg = db.pgFinishInbox(q, args, ib, a.Key, set)
		}
	}
	if err = db.pipelinedBatch(ctx, a.Urgent, fn, pg); err != nil {
		return false, mapErr(err, "finish delivery attempt") // fn's ok was rolled back with it
	}
	return ok, nil
}

// DueDeliveries implements notify.Store.
func (db *DB) DueDeliveries(ctx context.Context, now time.Time, limit int) ([]notify.Job, error) {
	return db.jobs(ctx, "due deliveries", `SELECT `+jobColumns+` FROM deliveries d JOIN notifications n ON n.id = d.notification_id
		WHERE d.status = 'queued' AND d.next_attempt_at IS NOT NULL AND d.next_attempt_at <= ?
		ORDER BY d.next_attempt_at LIMIT ?`, now.UnixMicro(), limit)
}

// StaleDeliveries implements notify.Store.
func (db *DB) StaleDeliveries(ctx context.Context, ch notify.Channel, c notify.Category, before time.Time, limit int) ([]notify.Job, error) {
	jobs, err := db.jobs(ctx, "stale deliveries", `SELECT `+jobColumns+` FROM deliveries d JOIN notifications n ON n.id = d.notification_id
		WHERE d.status = 'queued' AND d.next_attempt_at IS NULL AND d.channel = ? AND d.category = ? AND d.updated_at < ?
		ORDER BY d.updated_at LIMIT ?`, string(ch), string(c), before.UnixMicro(), limit)
	if err != nil || len(jobs) >= limit {
		return jobs, err
	}
	// Deliveries whose claim lapsed that long ago: the worker holding it
	// is gone, and so, perhaps, is its job.
	lapsed, err := db.jobs(ctx, "stale deliveries", `SELECT `+jobColumns+` FROM deliveries d JOIN notifications n ON n.id = d.notification_id
		WHERE d.status = 'sending' AND d.channel = ? AND d.category = ? AND d.claim_until < ?
		ORDER BY d.claim_until LIMIT ?`, string(ch), string(c), before.UnixMicro(), limit-len(jobs))
	return append(jobs, lapsed...), err
}

func (db *DB) jobs(ctx context.Context, op, q string, args ...any) ([]notify.Job, error) {
	rows, err := db.query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err, op)
	}
	return appendRows(nil, rows, op, scanJob)
}

// scanJob reads a row of jobColumns.
func scanJob(row rowScanner) (notify.Job, error) {
	var (
		j        notify.Job
		ch, cat  string
		data     string
		exp, due *int64
		attempts int
	)
	if err := row.Scan(&j.NotificationID, &ch, &j.UserID, &j.Type, &cat, &data, &exp, &j.CreatedAt, &attempts, &due); err != nil {
		return j, err
	}
	j.Channel, j.Category, j.Data, j.Attempt = notify.Channel(ch), notify.Category(cat), json.RawMessage(data), attempts
	if exp != nil {
		j.ExpiresAt = *exp
	}
	if due != nil {
		j.Due = *due
	}
	return j, nil
}

// MarkQueued implements notify.Store, group-committed.
func (db *DB) MarkQueued(ctx context.Context, keys []notify.DeliveryKey, at time.Time) error {
	if len(keys) == 0 {
		return nil
	}
	q := db.Rebind(`UPDATE deliveries SET status = 'queued', next_attempt_at = NULL, updated_at = ?, claim_owner = '', claim_until = NULL
		WHERE notification_id = ? AND channel = ?
		AND ((status = 'queued' AND (next_attempt_at IS NULL OR next_attempt_at <= ?)) OR (status = 'sending' AND claim_until < ?))`)
	err := db.batch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, k := range keys {
			if _, err := tx.ExecContext(ctx, q, at.UnixMicro(), k.NotificationID, string(k.Channel), at.UnixMicro(), at.UnixMicro()); err != nil {
				return err
			}
		}
		return nil
	})
	return mapErr(err, "mark deliveries queued")
}

// DeleteNotificationsBefore implements notify.Store. Deliveries, dead
// letters and outbox entries go with their notification (ON DELETE CASCADE).
func (db *DB) DeleteNotificationsBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	res, err := db.backgroundExec(ctx, `DELETE FROM notifications WHERE id IN (SELECT id FROM notifications WHERE created_at < ? ORDER BY created_at LIMIT ?)`,
		t.UnixMicro(), limit)
	if err != nil {
		return 0, mapErr(err, "delete old notifications")
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(err, "delete old notifications")
}

func scanNotification(row interface{ Scan(...any) error }) (notify.Notification, error) {
	var (
		n         notify.Notification
		reqID     *string
		cat, data string
		chs       string
		exp       *int64
		created   int64
	)
	if err := row.Scan(&n.ID, &reqID, &n.RequestHash, &n.UserID, &n.Type, &cat, &data, &chs, &exp, &created); err != nil {
		return n, err
	}
	if reqID != nil {
		n.RequestID = *reqID
	}
	n.Category, n.Data = notify.Category(cat), json.RawMessage(data)
	var names []string
	if err := json.Unmarshal([]byte(chs), &names); err != nil {
		return n, fmt.Errorf("decode channels of %s: %w", n.ID, err)
	}
	for _, name := range names {
		n.Channels = append(n.Channels, notify.Channel(name))
	}
	n.ExpiresAt, n.CreatedAt = fromMicros(exp), fromMicros(&created)
	return n, nil
}

func scanDelivery(row interface{ Scan(...any) error }) (notify.Delivery, error) {
	var (
		d                notify.Delivery
		ch, cat, status  string
		next, exp, claim *int64
		created, updated int64
		hops             string
	)
	if err := row.Scan(&d.NotificationID, &ch, &d.UserID, &cat, &d.Provider, &status, &d.Attempts, &d.Error,
		&next, &exp, &created, &updated, &d.ProviderMessageID, &hops, &claim); err != nil {
		return d, err
	}
	if hops != "" {
		if err := json.Unmarshal([]byte(hops), &d.Hops); err != nil {
			return d, fmt.Errorf("delivery hops: %w", err)
		}
	}
	d.Channel, d.Category, d.Status = notify.Channel(ch), notify.Category(cat), notify.Status(status)
	d.NextAttemptAt, d.ExpiresAt = fromMicros(next), fromMicros(exp)
	d.CreatedAt, d.UpdatedAt = fromMicros(&created), fromMicros(&updated)
	if d.Status == notify.StatusSending {
		d.ClaimUntil = fromMicros(claim)
	}
	return d, nil
}
