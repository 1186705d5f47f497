package store

import (
	"github.com/sluicehq/sluice/internal/notify"
)

// The pipelined forms of the two writes on the notification hot path
// (see pipeline.go). Each is one statement whose data-modifying CTEs do
// what the database/sql form decides between statements: later writes
// happen only if the first one wrote a row (WHERE EXISTS on its RETURNING),
// and the statement selects how many rows the first one wrote. Parameters
// in a SELECT or a VALUES list that is not an INSERT's own carry their
// column's type (see migrations/postgres), which PostgreSQL cannot infer
// there.

const (
	insertNotificationQuery = `INSERT INTO notifications (` + notificationColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`
	// finishAttemptUpdate moves a delivery on from attempt Prev, queued or
	// sending under the attempt's claim, and clears the claim; a stale
	// copy of the job (another attempt count, no longer queued, another
	// worker's claim) updates nothing.
	finishAttemptUpdate = `UPDATE deliveries SET status = ?, attempts = ?, error = ?, next_attempt_at = ?, updated_at = ?,
		provider = CASE WHEN ? = '' THEN provider ELSE ? END, provider_message_id = ?, hops = ?, claim_owner = '', claim_until = NULL
		WHERE notification_id = ? AND channel = ? AND attempts = ? AND (status = 'queued' OR (status = 'sending' AND claim_owner = ?))`
	// claimDeliveryUpdate marks a delivery sending for one attempt: a
	// queued one that is due, or one whose claim has lapsed.
	claimDeliveryUpdate = `UPDATE deliveries SET status = 'sending', claim_owner = ?, claim_until = ?, updated_at = ?
		WHERE notification_id = ? AND channel = ? AND attempts = ?
		AND ((status = 'queued' AND (next_attempt_at IS NULL OR next_attempt_at <= ?)) OR (status = 'sending' AND claim_until <= ?))`
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
// updates the delivery (uArgs, as finishAttemptUpdate takes them) and, only
// if that updated it, adds the outbox entry e and the dead letter dl (each
// when not nil), and selects how many deliveries it updated.
func (db *DB) finishAttemptPipelined(uArgs []any, e *notify.OutboxEntry, dl *notify.DeadLetter) (string, []any) {
	q := `WITH u AS (` + finishAttemptUpdate + ` RETURNING 1)`
	args := append([]any(nil), uArgs...)
	if e != nil {
		q += `, o AS (INSERT INTO outbox (` + outboxColumns + `)
			SELECT ?::text, ?::text, ?::bigint, ?::text, ?::text, ?::text, ?::text, ?::bigint
			WHERE EXISTS (SELECT 1 FROM u) ON CONFLICT DO NOTHING)`
		args = append(args, outboxArgs(e)...)
	}
	if dl != nil {
		q += `, dl AS (INSERT INTO dead_letters (` + deadLetterColumns + `)
			SELECT ?::text, ?::text, ?::text, ?::text, ?::text, ?::bigint, ?::bigint
			WHERE EXISTS (SELECT 1 FROM u))`
		args = append(args, deadLetterArgs(dl)...)
	}
	return db.Rebind(q + ` SELECT count(*) FROM u`), args
}

// deadLetterArgs returns dl's values for deadLetterColumns.
func deadLetterArgs(dl *notify.DeadLetter) []any {
	return []any{dl.ID, dl.NotificationID, string(dl.Channel), dl.UserID, dl.Error, dl.Attempts, toMicros(dl.CreatedAt)}
}
