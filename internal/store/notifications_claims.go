package store

import (
	"context"

	"github.com/sluicehq/sluice/internal/notify"
)

// ClaimDelivery implements notify.Store, group-committed: one conditional
// UPDATE, so of concurrent claims exactly one changes the row.
func (db *DB) ClaimDelivery(ctx context.Context, c notify.Claim) (bool, error) {
	at := c.At.UnixMicro()
	args := []any{c.Owner, c.Until.UnixMicro(), at, c.Key.NotificationID, string(c.Key.Channel), c.Prev, at, at}
	ok, err := db.writeChanged(ctx, c.Urgent, claimDeliveryUpdate, args)
	return ok, mapErr(err, "claim delivery")
}

// ExtendClaim implements notify.Store, group-committed: one conditional
// UPDATE that moves claim_until on while the claim is still c.Owner's.
func (db *DB) ExtendClaim(ctx context.Context, c notify.Claim) (bool, error) {
	args := []any{c.Until.UnixMicro(), c.Key.NotificationID, string(c.Key.Channel), c.Owner}
	ok, err := db.writeChanged(ctx, c.Urgent, extendClaimUpdate, args)
	return ok, mapErr(err, "extend delivery claim")
}
