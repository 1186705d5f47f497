package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/inbox"
	"github.com/sluicehq/sluice/internal/notify"
)

var _ inbox.Store = (*DB)(nil)

const (
	inboxColumns = `user_id, seq, id, type, category, subject, body, data, created_at, read_at, archived_at`
	// nextInboxSeqQuery takes the user's next seq; on PostgreSQL the row
	// lock it takes orders concurrent adds for one user.
	nextInboxSeqQuery = `INSERT INTO inbox_users (user_id, last_seq) VALUES (?, 1)
		ON CONFLICT (user_id) DO UPDATE SET last_seq = inbox_users.last_seq + 1 RETURNING last_seq`
	inboxByIDQuery  = `SELECT ` + inboxColumns + ` FROM inbox_messages WHERE user_id = ? AND id = ?`
	inboxUnreadExpr = `read_at IS NULL AND archived_at IS NULL`
)

// AddInboxMessage implements inbox.Store.
func (db *DB) AddInboxMessage(ctx context.Context, m inbox.Message) (inbox.Message, bool, error) {
	for try := 0; ; try++ {
		stored, added, err := db.addInboxMessage(ctx, m)
		// Two adds of one message raced on PostgreSQL: the loser's
		// insert hit the unique index; read the winner's row.
		if try == 0 && apperr.Is(err, apperr.Conflict) {
			continue
		}
		return stored, added, err
	}
}

func (db *DB) addInboxMessage(ctx context.Context, m inbox.Message) (stored inbox.Message, added bool, err error) {
	data := ""
	if len(m.Data) > 0 {
		data = string(m.Data)
	}
	// Group-committed with the notifications' writes: one fsync serves
	// many messages. fn may run twice (see batch), so it sets its results
	// afresh each time.
	err = db.batch(ctx, func(ctx context.Context, tx *sql.Tx) error {
		stored, added = inbox.Message{}, false
		m := m
		found, err := scanInbox(tx.QueryRowContext(ctx, db.Rebind(inboxByIDQuery), m.UserID, m.ID))
		if err == nil {
			stored = found
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return mapErr(err, "read inbox message")
		}
		if err := tx.QueryRowContext(ctx, db.Rebind(nextInboxSeqQuery), m.UserID).Scan(&m.Seq); err != nil {
			return mapErr(err, "number inbox message")
		}
		if _, err := tx.ExecContext(ctx, db.Rebind(insertInboxQuery),
			m.UserID, m.Seq, m.ID, m.Type, m.Category, m.Subject, m.Body, data, toMicros(m.CreatedAt)); err != nil {
			return mapErr(err, "add inbox message")
		}
		m.CreatedAt = m.CreatedAt.Truncate(time.Microsecond).UTC()
		m.ReadAt, m.ArchivedAt = time.Time{}, time.Time{}
		stored, added = m, true
		return nil
	})
	if err != nil {
		return inbox.Message{}, false, err
	}
	return stored, added, nil
}

// The inbox row of an inapp delivery's sent outcome (notify.Attempt.Inbox)
// is written in FinishAttempt's transaction, after the outcome's update
// and only if that applied: the row, its seq and the sent status commit
// together, in one group commit. It is the same write as AddInboxMessage's
// (a message the inbox holds already is kept, with its seq), and then sets
// the delivery's provider message id to "user_id:seq".
const (
	inboxSeqByIDQuery = `SELECT seq FROM inbox_messages WHERE user_id = ? AND id = ?`
	insertInboxQuery  = `INSERT INTO inbox_messages (` + inboxColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)`
	// inboxMessageIDUpdate sets the provider message id of the delivery
	// whose sent outcome stored an inbox row. The outcome's update left
	// it empty; a stale copy of the job finds it set and changes nothing.
	inboxMessageIDUpdate = `UPDATE deliveries SET provider_message_id = m.user_id || ':' || m.seq FROM inbox_messages m
		WHERE deliveries.notification_id = ? AND deliveries.channel = ? AND deliveries.provider_message_id = ''
		AND m.user_id = ? AND m.id = deliveries.notification_id`
)

// inboxWrite is an outcome's inbox row, with its statements prepared.
type inboxWrite struct {
	e                         *notify.InboxEntry
	find, next, insert, setID stmt
	args                      []any // insertInboxQuery's, after user_id and seq
}

// newInboxWrite returns the write of e, or nil when e is nil. Call it
// outside a transaction (see writeStmt).
func (db *DB) newInboxWrite(ctx context.Context, e *notify.InboxEntry) (*inboxWrite, error) {
	if e == nil {
		return nil, nil
	}
	w := &inboxWrite{e: e, args: inboxEntryArgs(e)}
	for _, p := range []struct {
		s *stmt
		q string
	}{{&w.find, inboxSeqByIDQuery}, {&w.next, nextInboxSeqQuery}, {&w.insert, insertInboxQuery}, {&w.setID, inboxMessageIDUpdate}} {
		var err error
		if *p.s, err = db.writeStmt(ctx, db.Rebind(p.q)); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// inboxEntryArgs returns e's values for inboxColumns after user_id and
// seq, up to created_at.
func inboxEntryArgs(e *notify.InboxEntry) []any {
	data := ""
	if len(e.Data) > 0 {
		data = string(e.Data)
	}
	return []any{e.NotificationID, e.Type, string(e.Category), e.Subject, e.Body, data, toMicros(e.CreatedAt)}
}

// exec writes the row in tx, once the outcome's update applied, and sets
// the entry's Seq.
func (w *inboxWrite) exec(ctx context.Context, tx *sql.Tx, key notify.DeliveryKey) error {
	e := w.e
	err := w.find.queryRow(ctx, tx, e.UserID, e.NotificationID).Scan(&e.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		if err = w.next.queryRow(ctx, tx, e.UserID).Scan(&e.Seq); err != nil {
			return err
		}
		_, err = w.insert.exec(ctx, tx, append([]any{e.UserID, e.Seq}, w.args...)...)
	}
	if err != nil {
		return err
	}
	_, err = w.setID.exec(ctx, tx, key.NotificationID, string(key.Channel), e.UserID)
	return err
}

// InboxMessages implements inbox.Store.
func (db *DB) InboxMessages(ctx context.Context, user string, before int64, limit int, archived bool) ([]inbox.Message, error) {
	q := `SELECT ` + inboxColumns + ` FROM inbox_messages WHERE user_id = ?`
	args := []any{user}
	if archived {
		q += ` AND archived_at IS NOT NULL`
	} else {
		q += ` AND archived_at IS NULL`
	}
	if before > 0 {
		q += ` AND seq < ?`
		args = append(args, before)
	}
	q += ` ORDER BY seq DESC LIMIT ?`
	return db.queryInbox(ctx, q, append(args, limit)...)
}

// InboxMessagesAfter implements inbox.Store.
func (db *DB) InboxMessagesAfter(ctx context.Context, user string, after int64, limit int) ([]inbox.Message, error) {
	return db.queryInbox(ctx, `SELECT `+inboxColumns+` FROM inbox_messages WHERE user_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		user, after, limit)
}

// InboxUnread implements inbox.Store.
func (db *DB) InboxUnread(ctx context.Context, user string) (int, error) {
	var n int
	err := db.queryRow(ctx, `SELECT count(*) FROM inbox_messages WHERE user_id = ? AND `+inboxUnreadExpr, user).Scan(&n)
	return n, mapErr(err, "count unread inbox messages")
}

// SetInboxState implements inbox.Store.
func (db *DB) SetInboxState(ctx context.Context, user, id string, a inbox.Action, at time.Time) (inbox.Message, error) {
	var set string
	var args []any
	switch a {
	case inbox.Read:
		set, args = `read_at = COALESCE(read_at, ?)`, []any{toMicros(at)}
	case inbox.Unread:
		set = `read_at = NULL`
	case inbox.Archive:
		set, args = `archived_at = COALESCE(archived_at, ?), read_at = COALESCE(read_at, ?)`, []any{toMicros(at), toMicros(at)}
	default:
		return inbox.Message{}, fmt.Errorf("set inbox state: unknown action %q", a)
	}
	var m inbox.Message
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.Rebind(`UPDATE inbox_messages SET `+set+` WHERE user_id = ? AND id = ?`),
			append(args, user, id)...)
		if err != nil {
			return mapErr(err, "set inbox state")
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return apperr.New(apperr.NotFound, "no message %q in user %q's inbox", id, user)
		}
		m, err = scanInbox(tx.QueryRowContext(ctx, db.Rebind(inboxByIDQuery), user, id))
		return mapErr(err, "read inbox message")
	})
	return m, err
}

// MarkInboxRead implements inbox.Store.
func (db *DB) MarkInboxRead(ctx context.Context, user string, at time.Time) (int, error) {
	res, err := db.exec(ctx, `UPDATE inbox_messages SET read_at = ? WHERE user_id = ? AND `+inboxUnreadExpr, toMicros(at), user)
	if err != nil {
		return 0, mapErr(err, "mark inbox read")
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(err, "mark inbox read")
}

// DeleteInboxBefore deletes up to limit inbox messages that arrived before
// t (the notification history's retention) and returns how many.
func (db *DB) DeleteInboxBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	res, err := db.backgroundExec(ctx, `DELETE FROM inbox_messages WHERE (user_id, seq) IN
		(SELECT user_id, seq FROM inbox_messages WHERE created_at < ? ORDER BY created_at LIMIT ?)`, toMicros(t), limit)
	if err != nil {
		return 0, mapErr(err, "purge inbox")
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(err, "purge inbox")
}

func (db *DB) queryInbox(ctx context.Context, q string, args ...any) ([]inbox.Message, error) {
	rows, err := db.query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err, "list inbox")
	}
	return appendRows([]inbox.Message{}, rows, "list inbox", scanInbox)
}

func scanInbox(r interface{ Scan(...any) error }) (inbox.Message, error) {
	var (
		m                      inbox.Message
		data                   string
		created, read, archive *int64
	)
	if err := r.Scan(&m.UserID, &m.Seq, &m.ID, &m.Type, &m.Category, &m.Subject, &m.Body, &data, &created, &read, &archive); err != nil {
		return inbox.Message{}, err
	}
	if data != "" {
		m.Data = []byte(data)
	}
	m.CreatedAt, m.ReadAt, m.ArchivedAt = fromMicros(created), fromMicros(read), fromMicros(archive)
	return m, nil
}

// NotificationRead reports whether userID read (or archived) the inbox
// message of notification id: the escalation condition "read"
// (notify.InboxReads). A notification that never reached the inbox is
// not read.
func (db *DB) NotificationRead(ctx context.Context, userID, id string) (bool, error) {
	var n int
	err := db.queryRow(ctx, `SELECT count(*) FROM inbox_messages WHERE user_id = ? AND id = ? AND read_at IS NOT NULL`, userID, id).Scan(&n)
	return n > 0, mapErr(err, "read inbox message state")
}
