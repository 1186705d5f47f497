package store

import (
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/notify"
)

// The pipelined forms of the two writes on the notification hot path. See
// the package doc, "Pipelined group commit on PostgreSQL".

const (
	insertNotificationQuery = `INSERT INTO notifications (` + notificationColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`
	// finishAttemptUpdate moves a delivery on from attempt Prev, queued or
	// sending under the attempt's claim, and clears the claim; a stale
	// copy of the job (another attempt count, no longer queued, another
	// worker's claim) updates nothing. The outbox columns take the
	// attempt's outbox entry (outboxArgs), or stay as they are when its
	// values are NULL.
	finishAttemptUpdate = `UPDATE deliveries SET status = ?, attempts = ?, error = ?, next_attempt_at = ?, updated_at = ?,
		provider = CASE WHEN ? = '' THEN provider ELSE ? END, provider_message_id = ?, hops = ?, claim_owner = '', claim_until = NULL,
		outbox_attempt = COALESCE(?, outbox_attempt), outbox_to = COALESCE(?, outbox_to), outbox_subject = COALESCE(?, outbox_subject),
		outbox_body = COALESCE(?, outbox_body), outbox_html = COALESCE(?, outbox_html), outbox_at = COALESCE(?, outbox_at)
		WHERE notification_id = ? AND channel = ? AND attempts = ? AND (status = 'queued' OR (status = 'sending' AND claim_owner = ?))`
	// claimDeliveryUpdate marks a delivery sending for one attempt: a
	// queued one that is due, or one whose claim has lapsed.
	claimDeliveryUpdate = `UPDATE deliveries SET status = 'sending', claim_owner = ?, claim_until = ?, updated_at = ?
		WHERE notification_id = ? AND channel = ? AND attempts = ?
		AND ((status = 'queued' AND (next_attempt_at IS NULL OR next_attempt_at <= ?)) OR (status = 'sending' AND claim_until <= ?))`
	// extendClaimUpdate moves a held claim's lapse on; a claim another
	// worker took over (or an outcome stored) updates nothing.
	extendClaimUpdate = `UPDATE deliveries SET claim_until = ?
		WHERE notification_id = ? AND channel = ? AND status = 'sending' AND claim_owner = ?`
	deadLetterColumns = `id, notification_id, channel, user_id, error, attempts, created_at`
)

// createNotificationPipelined returns CreateNotification as one statement
// that inserts the notification (nArgs, as insertNotificationQuery takes
// them) and, only if that inserted it, its deliveries ds, and selects how
// many notifications it inserted: 0 when the request_id (or id) was taken.
func (db *DB) createNotificationPipelined(nArgs []any, ds []notify.Delivery) (string, []any) {
	q := `WITH n AS (` + insertNotificationQuery + ` RETURNING 1)`
	args := append([]any(nil), nArgs...)
	if len(ds) > 0 {
		values, dArgs := deliveryValues(ds, deliveryRowTyped)
		q += `, d AS (INSERT INTO deliveries (` + deliveryColumns + `)
			SELECT * FROM (VALUES ` + values + `) v WHERE EXISTS (SELECT 1 FROM n))`
		args = append(args, dArgs...)
	}
	return db.Rebind(q + ` SELECT count(*) FROM n`), args
}

// finishAttemptPipelined returns FinishAttempt as one statement that
// updates the delivery (uArgs, as finishAttemptUpdate takes them, with its
// outbox entry) and, only if that updated it, adds the inbox row ib and
// the dead letter dl (each when not nil), and selects how many deliveries
// it updated; with ib, also the inbox row's seq (0 when none), in a second
// column.
func (db *DB) finishAttemptPipelined(uArgs []any, ib *inboxWrite, dl *notify.DeadLetter) (string, []any) {
	q := `WITH u AS (` + finishAttemptUpdate + ` RETURNING 1)`
	args := append([]any(nil), uArgs...)
	if dl != nil {
		q += `, dl AS (INSERT INTO dead_letters (` + deadLetterColumns + `)
			SELECT ?::text, ?::text, ?::text, ?::text, ?::text, ?::bigint, ?::bigint
			WHERE EXISTS (SELECT 1 FROM u))`
		args = append(args, deadLetterArgs(dl)...)
	}
	if ib != nil {
		// As inboxWrite.exec: a message the inbox holds (ex) keeps its
		// seq; otherwise the user's next seq (s, whose row lock orders
		// one user's concurrent messages) numbers the new row (i).
		q += `, ex AS (SELECT seq FROM inbox_messages WHERE user_id = ?::text AND id = ?::text),
			s AS (INSERT INTO inbox_users (user_id, last_seq) SELECT ?::text, 1::bigint
				WHERE EXISTS (SELECT 1 FROM u) AND NOT EXISTS (SELECT 1 FROM ex)
				ON CONFLICT (user_id) DO UPDATE SET last_seq = inbox_users.last_seq + 1 RETURNING last_seq),
			i AS (INSERT INTO inbox_messages (` + inboxColumns + `)
				SELECT ?::text, s.last_seq, ?::text, ?::text, ?::text, ?::text, ?::text, ?::text, ?::bigint, NULL::bigint, NULL::bigint
				FROM s ON CONFLICT DO NOTHING RETURNING seq)`
		args = append(args, ib.e.UserID, ib.e.NotificationID, ib.e.UserID, ib.e.UserID)
		args = append(args, ib.args...)
		return db.Rebind(q + ` SELECT (SELECT count(*) FROM u), COALESCE((SELECT seq FROM i), (SELECT seq FROM ex), 0)`), args
	}
	return db.Rebind(q + ` SELECT count(*) FROM u`), args
}

// pgFinishInbox returns the pipelined form of a FinishAttempt with an
// inbox row: q and args as finishAttemptPipelined returns them, then
// inboxMessageIDUpdate. The reader passes the count of updated deliveries
// to set and, when that is not 0, the row's seq to ib's entry.
func (db *DB) pgFinishInbox(q string, args []any, ib *inboxWrite, key notify.DeliveryKey, set func(n int64)) pgWrite {
	idQ := db.Rebind(inboxMessageIDUpdate)
	return func(b *pgx.Batch) func(pgx.BatchResults) error {
		b.Queue(q, args...)
		b.Queue(idQ, key.NotificationID, string(key.Channel), ib.e.UserID)
		return func(br pgx.BatchResults) error {
			var n, seq int64
			if err := br.QueryRow().Scan(&n, &seq); err != nil {
				return err
			}
			if _, err := br.Exec(); err != nil {
				return err
			}
			set(n)
			if n > 0 {
				ib.e.Seq = seq
			}
			return nil
		}
	}
}

// deadLetterArgs returns dl's values for deadLetterColumns.
func deadLetterArgs(dl *notify.DeadLetter) []any {
	return []any{dl.ID, dl.NotificationID, string(dl.Channel), dl.UserID, dl.Error, dl.Attempts, toMicros(dl.CreatedAt)}
}
