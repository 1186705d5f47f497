package store

import (
	"context"
	"database/sql"

	"github.com/sluicehq/sluice/internal/notify"
)

// ClaimDelivery implements notify.Store, group-committed: one conditional
// UPDATE, so of concurrent claims exactly one changes the row.
func (db *DB) ClaimDelivery(ctx context.Context, c notify.Claim) (bool, error) {
	update, err := db.writeStmt(ctx, db.Rebind(claimDeliveryUpdate))
	if err != nil {
		return false, err
	}
	at := c.At.UnixMicro()
	args := []any{c.Owner, c.Until.UnixMicro(), at, c.Key.NotificationID, string(c.Key.Channel), c.Prev, at, at}
	var ok bool
	fn := func(ctx context.Context, tx *sql.Tx) error {
		ok = false
		res, err := update.exec(ctx, tx, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = err == nil && n > 0
		return err
	}
	var pg pgWrite
	if db.dialect == DialectPostgres {
		q := db.Rebind(`WITH u AS (` + claimDeliveryUpdate + ` RETURNING 1) SELECT count(*) FROM u`)
		pg = pgCount(q, args, func(updated int64) { ok = updated > 0 })
	}
	err = db.pipelinedBatch(ctx, c.Urgent, fn, pg)
	return ok, mapErr(err, "claim delivery")
}

// ExtendClaim implements notify.Store, group-committed: one conditional
// UPDATE that moves claim_until on while the claim is still c.Owner's.
func (db *DB) ExtendClaim(ctx context.Context, c notify.Claim) (bool, error) {
	update, err := db.writeStmt(ctx, db.Rebind(extendClaimUpdate))
	if err != nil {
		return false, err
	}
	args := []any{c.Until.UnixMicro(), c.Key.NotificationID, string(c.Key.Channel), c.Owner}
	var ok bool
	fn := func(ctx context.Context, tx *sql.Tx) error {
		ok = false
		res, err := update.exec(ctx, tx, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = err == nil && n > 0
		return err
	}
	var pg pgWrite
	if db.dialect == DialectPostgres {
		q := db.Rebind(`WITH u AS (` + extendClaimUpdate + ` RETURNING 1) SELECT count(*) FROM u`)
		pg = pgCount(q, args, func(updated int64) { ok = updated > 0 })
	}
	err = db.pipelinedBatch(ctx, c.Urgent, fn, pg)
	return ok, mapErr(err, "extend delivery claim")
}
