package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/audience"
)

const broadcastColumns = `id, request_id, hash, type, topic, segment, data, channels, send_at, local_time, local_date,
	status, planned, targeted, accepted, skipped, due_at, seq, created_at, updated_at`

func scanBroadcast(r rowScanner) (audience.Broadcast, error) {
	var (
		b                      audience.Broadcast
		data, chans, status    string
		sendAt, created, updat int64
		planned                int64
		due                    *int64
	)
	err := r.Scan(&b.ID, &b.RequestID, &b.Hash, &b.Type, &b.To.Topic, &b.To.Segment, &data, &chans, &sendAt,
		&b.Local.Time, &b.Local.Date, &status, &planned, &b.Targeted, &b.Accepted, &b.Skipped, &due, &b.Seq, &created, &updat)
	if err != nil {
		return b, err
	}
	b.Data, b.Status, b.Planned = []byte(data), audience.Status(status), planned != 0
	if err := json.Unmarshal([]byte(chans), &b.Channels); err != nil {
		return b, err
	}
	b.SendAt, b.DueAt, b.CreatedAt, b.UpdatedAt = fromMicros(&sendAt), fromMicros(due), fromMicros(&created), fromMicros(&updat)
	return b, nil
}

// CreateBroadcast implements audience.Store in one transaction.
func (db *DB) CreateBroadcast(ctx context.Context, b audience.Broadcast, maxLive int) (audience.Broadcast, bool, error) {
	if b.Channels == nil {
		b.Channels = []string{}
	}
	chans, err := json.Marshal(b.Channels)
	if err != nil {
		return audience.Broadcast{}, false, err
	}
	var existing string
	err = db.InTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, db.Rebind(`SELECT id FROM broadcasts WHERE request_id = ?`), b.RequestID).Scan(&existing)
		if err == nil || !errNoRows(err) {
			return mapErr(err, "find broadcast")
		}
		var live int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM broadcasts WHERE due_at IS NOT NULL`).Scan(&live); err != nil {
			return mapErr(err, "count broadcasts")
		}
		if live >= maxLive {
			return apperr.New(apperr.TooMany, "this node keeps at most %d scheduled or sending broadcasts (notify.audiences.max_live_broadcasts)", maxLive)
		}
		planned := 0
		if b.Planned {
			planned = 1
		}
		_, err = tx.ExecContext(ctx, db.Rebind(`INSERT INTO broadcasts (`+broadcastColumns+`)
			VALUES (`+marks(20)+`)`), b.ID, b.RequestID, b.Hash, b.Type, b.To.Topic, b.To.Segment, string(b.Data), string(chans),
			b.SendAt.UnixMicro(), b.Local.Time, b.Local.Date, string(b.Status), planned, b.Targeted, b.Accepted, b.Skipped,
			toMicros(b.DueAt), b.Seq, b.CreatedAt.UnixMicro(), b.UpdatedAt.UnixMicro())
		if err != nil {
			return mapErr(err, "create broadcast")
		}
		return db.insertGroups(ctx, tx, b.ID, b.Groups)
	})
	if apperr.Is(err, apperr.Conflict) { // a concurrent create with the same request_id won
		err = mapErr(db.queryRow(ctx, `SELECT id FROM broadcasts WHERE request_id = ?`, b.RequestID).Scan(&existing), "find broadcast")
	}
	if err != nil {
		return audience.Broadcast{}, false, err
	}
	if existing != "" {
		got, err := db.Broadcast(ctx, existing)
		return got, false, err
	}
	return b, true, nil
}

func (db *DB) insertGroups(ctx context.Context, tx *sql.Tx, id string, groups []audience.Group) error {
	for _, g := range groups {
		_, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO broadcast_groups (broadcast_id, timezone, due_at, last_user, status)
			VALUES (?, ?, ?, ?, ?)`), id, g.Timezone, g.DueAt.UnixMicro(), g.Cursor, groupStatus(g.Done))
		if err != nil {
			return mapErr(err, "create broadcast group")
		}
	}
	return nil
}

func groupStatus(done bool) string {
	if done {
		return "done"
	}
	return "pending"
}

// Broadcast implements audience.Store.
func (db *DB) Broadcast(ctx context.Context, id string) (audience.Broadcast, error) {
	b, err := scanBroadcast(db.queryRow(ctx, `SELECT `+broadcastColumns+` FROM broadcasts WHERE id = ?`, id))
	if errNoRows(err) {
		return b, apperr.New(apperr.NotFound, "broadcast %q not found", id)
	}
	if err != nil {
		return b, mapErr(err, "get broadcast")
	}
	b.Groups, err = db.groups(ctx, id)
	return b, err
}

func (db *DB) groups(ctx context.Context, id string) ([]audience.Group, error) {
	rows, err := db.query(ctx, `SELECT timezone, due_at, last_user, status FROM broadcast_groups WHERE broadcast_id = ?
		ORDER BY due_at, timezone`, id)
	if err != nil {
		return nil, mapErr(err, "list broadcast groups")
	}
	return appendRows([]audience.Group{}, rows, "list broadcast groups", func(r rowScanner) (audience.Group, error) {
		var (
			g      audience.Group
			due    int64
			status string
		)
		err := r.Scan(&g.Timezone, &due, &g.Cursor, &status)
		g.DueAt, g.Done = fromMicros(&due), status == "done"
		return g, err
	})
}

// Broadcasts implements audience.Store.
func (db *DB) Broadcasts(ctx context.Context, before string, limit int) ([]audience.Broadcast, error) {
	rows, err := db.query(ctx, `SELECT `+broadcastColumns+` FROM broadcasts WHERE ? = '' OR id < ? ORDER BY id DESC LIMIT ?`,
		before, before, limit)
	if err != nil {
		return nil, mapErr(err, "list broadcasts")
	}
	return appendRows([]audience.Broadcast{}, rows, "list broadcasts", scanBroadcast)
}

// ClaimBroadcast implements audience.Store in one statement, as
// ClaimDue does for workflow runs: the pick skips rows another claim has
// locked on PostgreSQL; SQLite runs one write at a time.
func (db *DB) ClaimBroadcast(ctx context.Context, now time.Time, lease time.Duration) (audience.Broadcast, bool, error) {
	lock := ""
	if db.dialect == DialectPostgres {
		lock = ` FOR UPDATE SKIP LOCKED`
	}
	q := `WITH due AS MATERIALIZED (SELECT id FROM broadcasts WHERE due_at <= ? ORDER BY due_at LIMIT 1` + lock + `)
		UPDATE broadcasts SET due_at = ?, seq = seq + 1 WHERE id IN (SELECT id FROM due) RETURNING ` + broadcastColumns
	b, err := scanBroadcast(db.write.QueryRowContext(ctx, db.Rebind(q), now.UnixMicro(), now.Add(lease).UnixMicro()))
	if errNoRows(err) {
		return b, false, nil
	}
	if err != nil {
		return b, false, mapErr(err, "claim broadcast")
	}
	b.Groups, err = db.groups(ctx, b.ID)
	return b, err == nil, err
}

// SaveProgress implements audience.Store in one transaction.
func (db *DB) SaveProgress(ctx context.Context, p audience.Progress) (int64, error) {
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		planned := 0
		if p.Plan != nil {
			planned = 1
		}
		res, err := tx.ExecContext(ctx, db.Rebind(`UPDATE broadcasts SET status = ?, due_at = ?, seq = seq + 1,
			targeted = targeted + ?, accepted = accepted + ?, skipped = skipped + ?,
			planned = CASE WHEN ? = 1 THEN 1 ELSE planned END, updated_at = ? WHERE id = ? AND seq = ?`),
			string(p.Status), toMicros(p.DueAt), p.Targeted, p.Accepted, p.Skipped, planned, p.Now.UnixMicro(), p.ID, p.Seq)
		if err != nil {
			return mapErr(err, "save broadcast progress")
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return mapErr(err, "save broadcast progress")
			}
			return db.lostBroadcast(ctx, tx, p.ID, p.Seq)
		}
		if err := db.insertGroups(ctx, tx, p.ID, p.Plan); err != nil {
			return err
		}
		if g := p.Group; g != nil {
			_, err := tx.ExecContext(ctx, db.Rebind(`UPDATE broadcast_groups SET last_user = ?, status = ?
				WHERE broadcast_id = ? AND timezone = ?`), g.Cursor, groupStatus(g.Done), p.ID, g.Timezone)
			return mapErr(err, "save broadcast group progress")
		}
		return nil
	})
	return p.Seq + 1, err
}

// lostBroadcast is the error of a write whose seq no longer holds.
func (db *DB) lostBroadcast(ctx context.Context, tx *sql.Tx, id string, seq int64) error {
	var n int
	if err := tx.QueryRowContext(ctx, db.Rebind(`SELECT count(*) FROM broadcasts WHERE id = ?`), id).Scan(&n); err != nil {
		return mapErr(err, "save broadcast progress")
	}
	if n == 0 {
		return apperr.New(apperr.NotFound, "broadcast %q not found", id)
	}
	return apperr.New(apperr.Conflict, "broadcast %q moved on since seq %d", id, seq)
}

// CancelBroadcast implements audience.Store.
func (db *DB) CancelBroadcast(ctx context.Context, id string, now time.Time) (audience.Broadcast, error) {
	_, err := db.exec(ctx, `UPDATE broadcasts SET status = 'canceled', due_at = NULL, seq = seq + 1, updated_at = ?
		WHERE id = ? AND status IN ('scheduled', 'sending')`, now.UnixMicro(), id)
	if err != nil {
		return audience.Broadcast{}, mapErr(err, "cancel broadcast")
	}
	return db.Broadcast(ctx, id)
}

// PurgeBroadcasts implements audience.Store in one transaction: the
// groups of the oldest final broadcasts, then the broadcasts.
func (db *DB) PurgeBroadcasts(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		const pick = `SELECT id FROM broadcasts WHERE status IN ('done', 'canceled') AND updated_at < ? ORDER BY updated_at LIMIT ?`
		if _, err := tx.ExecContext(ctx, db.Rebind(`DELETE FROM broadcast_groups WHERE broadcast_id IN (`+pick+`)`),
			before.UnixMicro(), limit); err != nil {
			return mapErr(err, "purge broadcast groups")
		}
		res, err := tx.ExecContext(ctx, db.Rebind(`DELETE FROM broadcasts WHERE id IN (`+pick+`)`), before.UnixMicro(), limit)
		if err != nil {
			return mapErr(err, "purge broadcasts")
		}
		n, err = res.RowsAffected()
		return mapErr(err, "purge broadcasts")
	})
	return int(n), err
}
