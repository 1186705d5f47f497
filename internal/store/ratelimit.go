package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/limits"
)

var _ limits.RuleStore = (*DB)(nil)

const policyColumns = "name, algorithm, limit_count, period_us, burst, mode, burst_over, on_store_failure, description, max_debt, sync, sync_interval_us"

// ListPolicies returns every stored rate limit policy, by name.
func (db *DB) ListPolicies(ctx context.Context) ([]limits.NamedPolicy, error) {
	rows, err := db.query(ctx, `SELECT `+policyColumns+` FROM ratelimit_policies ORDER BY name`)
	if err != nil {
		return nil, mapErr(err, "list policies")
	}
	defer rows.Close()
	out := []limits.NamedPolicy{}
	for rows.Next() {
		var (
			p              limits.NamedPolicy
			period, syncIv int64
		)
		if err := rows.Scan(&p.Name, &p.Algorithm, &p.Limit, &period, &p.Burst, &p.Mode, &p.BurstOver,
			&p.OnStoreFailure, &p.Description, &p.MaxDebt, &p.Sync, &syncIv); err != nil {
			return nil, mapErr(err, "list policies")
		}
		p.Period = limits.Period(time.Duration(period) * time.Microsecond)
		p.SyncInterval = limits.Period(time.Duration(syncIv) * time.Microsecond)
		out = append(out, p)
	}
	return out, mapErr(rows.Err(), "list policies")
}

// PutPolicy creates or replaces the policy named p.Name, reporting whether
// it was created. p is stored as given (callers validate and normalize).
func (db *DB) PutPolicy(ctx context.Context, p limits.NamedPolicy) (created bool, err error) {
	if p.Name == "" {
		return false, apperr.New(apperr.Invalid, "policy needs a name")
	}
	now := db.now().UnixMicro()
	period := time.Duration(p.Period).Microseconds()
	err = db.InTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, db.Rebind(`SELECT count(*) FROM ratelimit_policies WHERE name = ?`), p.Name).Scan(&n); err != nil {
			return mapErr(err, "put policy")
		}
		created = n == 0
		_, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO ratelimit_policies (`+policyColumns+`, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET algorithm = excluded.algorithm, limit_count = excluded.limit_count,
				period_us = excluded.period_us, burst = excluded.burst, mode = excluded.mode,
				burst_over = excluded.burst_over, on_store_failure = excluded.on_store_failure,
				description = excluded.description, max_debt = excluded.max_debt, sync = excluded.sync,
				sync_interval_us = excluded.sync_interval_us, updated_at = excluded.updated_at`),
			p.Name, string(p.Algorithm), p.Limit, period, p.Burst, string(p.Mode), p.BurstOver,
			string(p.OnStoreFailure), p.Description, p.MaxDebt, string(p.Sync), time.Duration(p.SyncInterval).Microseconds(), now, now)
		return mapErr(err, "put policy")
	})
	return created, err
}

// DeletePolicy deletes the named policy; apperr NotFound if there is none.
func (db *DB) DeletePolicy(ctx context.Context, name string) error {
	res, err := db.exec(ctx, `DELETE FROM ratelimit_policies WHERE name = ?`, name)
	if err != nil {
		return mapErr(err, "delete policy")
	}
	if n, err := res.RowsAffected(); err != nil {
		return mapErr(err, "delete policy")
	} else if n == 0 {
		return apperr.New(apperr.NotFound, "no such policy: %s", name)
	}
	return nil
}

// ListBlocks returns the blocks still active at now, by key, policy then
// domain.
func (db *DB) ListBlocks(ctx context.Context, now time.Time) ([]limits.Block, error) {
	rows, err := db.query(ctx, `SELECT key, policy, domain, reason, created_at, expires_at FROM ratelimit_blocks
		WHERE expires_at > ? ORDER BY key, policy, domain`, now.UnixMicro())
	if err != nil {
		return nil, mapErr(err, "list blocks")
	}
	defer rows.Close()
	out := []limits.Block{}
	for rows.Next() {
		var (
			b                  limits.Block
			created, expiresAt int64
		)
		if err := rows.Scan(&b.Key, &b.Policy, &b.Domain, &b.Reason, &created, &expiresAt); err != nil {
			return nil, mapErr(err, "list blocks")
		}
		b.CreatedAt, b.ExpiresAt = fromMicros(&created), fromMicros(&expiresAt)
		out = append(out, b)
	}
	return out, mapErr(rows.Err(), "list blocks")
}

// PutBlock creates or replaces the block of (b.Key, b.Policy, b.Domain), and deletes
// blocks that expired a day or more before b.CreatedAt (the caller's
// clock), so the table stays small.
func (db *DB) PutBlock(ctx context.Context, b limits.Block) error {
	if b.Key == "" || b.ExpiresAt.IsZero() {
		return apperr.New(apperr.Invalid, "block needs a key and an expiry")
	}
	if b.CreatedAt.IsZero() {
		b.CreatedAt = db.now()
	}
	return db.InTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO ratelimit_blocks (key, policy, domain, reason, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (key, policy, domain) DO UPDATE SET reason = excluded.reason, created_at = excluded.created_at,
				expires_at = excluded.expires_at`),
			b.Key, b.Policy, b.Domain, b.Reason, b.CreatedAt.UnixMicro(), b.ExpiresAt.UnixMicro())
		if err != nil {
			return mapErr(err, "put block")
		}
		_, err = tx.ExecContext(ctx, db.Rebind(`DELETE FROM ratelimit_blocks WHERE expires_at < ?`),
			b.CreatedAt.Add(-24*time.Hour).UnixMicro())
		return mapErr(err, "put block")
	})
}

// DeleteBlocks deletes key's blocks: all of them when policy and domain
// are nil, else those of *policy and of *domain. It returns how many rows
// went.
func (db *DB) DeleteBlocks(ctx context.Context, key string, policy, domain *string) (int, error) {
	q, args := `DELETE FROM ratelimit_blocks WHERE key = ?`, []any{key}
	if policy != nil {
		q, args = q+` AND policy = ?`, append(args, *policy)
	}
	if domain != nil {
		q, args = q+` AND domain = ?`, append(args, *domain)
	}
	res, err := db.exec(ctx, q, args...)
	if err != nil {
		return 0, mapErr(err, "delete blocks")
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(err, "delete blocks")
}
