package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.DomainStore = (*DB)(nil)

// A domain is one row per (domain, owner): the verified one, or each
// owner's pending claim (migration 0029). The partial unique index
// domains_verified keeps a verified domain to one row.
const domainColumns = "domain, owner, fallback_url, created_at, token, verified_at"

// lockDomainWrites serialises, on PostgreSQL, the transactions that add or
// verify domains in the current schema (a transaction-scoped advisory
// lock), so the caps and the one-verified-owner rule hold across nodes;
// SQLite's write lock does the same.
func (db *DB) lockDomainWrites(ctx context.Context, tx *sql.Tx) error {
	if db.dialect != DialectPostgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(1685024115, hashtext(current_schema()))`) // 1685024115: "doms"
	return err
}

func errDomainTaken(name, detail string) error {
	return &apperr.Error{Code: apperr.Conflict, Message: "the domain is already registered",
		Fields: []apperr.FieldError{{Field: "domain", Detail: fmt.Sprintf("%q %s", name, detail)}}}
}

// CreateDomain implements shorten.DomainStore.
func (db *DB) CreateDomain(ctx context.Context, d shorten.Domain, limits shorten.DomainLimits) (shorten.Domain, error) {
	d.CreatedAt = d.CreatedAt.Truncate(time.Microsecond).UTC()
	d.VerifiedAt = utcMicros(d.VerifiedAt)
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		if err := db.lockDomainWrites(ctx, tx); err != nil {
			return mapErr(err, "lock domains")
		}
		claims, err := db.domainRows(ctx, tx, `WHERE domain = ?`, d.Name)
		if err != nil {
			return err
		}
		for _, c := range claims {
			switch {
			case c.Verified():
				return errDomainTaken(d.Name, "is already registered")
			case c.Owner == d.Owner:
				return errDomainTaken(d.Name, "is already claimed by this caller: verify it")
			case d.Verified():
				return errDomainTaken(d.Name, "is claimed by another caller; registration needs verification while claims are pending")
			}
		}
		if err := db.checkDomainLimits(ctx, tx, d.Owner, limits); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, db.Rebind(`INSERT INTO domains (`+domainColumns+`) VALUES (?, ?, ?, ?, ?, ?)`),
			d.Name, d.Owner, d.FallbackURL, toMicros(d.CreatedAt), d.Token, toMicros(d.VerifiedAt))
		return err
	})
	if err != nil {
		return shorten.Domain{}, mapErr(err, "create domain")
	}
	return d, nil
}

// checkDomainLimits fails with TooMany when one more row for owner would
// pass limits.
func (db *DB) checkDomainLimits(ctx context.Context, tx *sql.Tx, owner string, limits shorten.DomainLimits) error {
	var mine, all int
	err := tx.QueryRowContext(ctx, db.Rebind(`SELECT count(CASE WHEN owner = ? THEN 1 END), count(*) FROM domains`), owner).Scan(&mine, &all)
	if err != nil {
		return err
	}
	if limits.PerOwner > 0 && mine >= limits.PerOwner {
		return apperr.New(apperr.TooMany, "this API key already holds %d custom domains and claims, the most one key may (links.domains.max_per_owner): delete one first", mine)
	}
	if limits.Total > 0 && all >= limits.Total {
		return apperr.New(apperr.TooMany, "this server already holds %d custom domains and claims, the most it keeps (links.domains.max)", all)
	}
	return nil
}

// domainRows reads the domain rows a WHERE clause selects, oldest first,
// in tx when it is not nil.
func (db *DB) domainRows(ctx context.Context, tx *sql.Tx, where string, args ...any) ([]shorten.Domain, error) {
	q := `SELECT ` + domainColumns + ` FROM domains ` + where
	var (
		rows *sql.Rows
		err  error
	)
	if tx != nil {
		rows, err = tx.QueryContext(ctx, db.Rebind(q+` ORDER BY created_at, owner`), args...)
	} else {
		rows, err = db.query(ctx, q+` ORDER BY created_at, owner`, args...)
	}
	if err != nil {
		return nil, mapErr(err, "read domains")
	}
	return appendRows([]shorten.Domain{}, rows, "read domains", scanDomain)
}

func scanDomain(rows rowScanner) (shorten.Domain, error) {
	var (
		d        shorten.Domain
		created  int64
		verified *int64
	)
	err := rows.Scan(&d.Name, &d.Owner, &d.FallbackURL, &created, &d.Token, &verified)
	d.CreatedAt = fromMicros(&created)
	d.VerifiedAt = fromMicros(verified)
	return d, err
}

// Domains implements shorten.DomainStore.
func (db *DB) Domains(ctx context.Context, limit int) ([]shorten.Domain, error) {
	rows, err := db.query(ctx, `SELECT `+domainColumns+` FROM domains ORDER BY domain, owner LIMIT ?`, limit)
	if err != nil {
		return nil, mapErr(err, "list domains")
	}
	return appendRows([]shorten.Domain{}, rows, "list domains", scanDomain)
}

// DomainClaims implements shorten.DomainStore.
func (db *DB) DomainClaims(ctx context.Context, name string) ([]shorten.Domain, error) {
	return db.domainRows(ctx, nil, `WHERE domain = ?`, name)
}

// domain reads owner's row of name, or an apperr NotFound error.
func (db *DB) domain(ctx context.Context, tx *sql.Tx, name, owner string) (shorten.Domain, error) {
	ds, err := db.domainRows(ctx, tx, `WHERE domain = ? AND owner = ?`, name, owner)
	if err != nil {
		return shorten.Domain{}, err
	}
	if len(ds) == 0 {
		return shorten.Domain{}, apperr.New(apperr.NotFound, "domain %q not found", name)
	}
	return ds[0], nil
}

// UpdateDomain implements shorten.DomainStore.
func (db *DB) UpdateDomain(ctx context.Context, name, owner, fallbackURL string) (shorten.Domain, error) {
	res, err := db.exec(ctx, `UPDATE domains SET fallback_url = ? WHERE domain = ? AND owner = ?`, fallbackURL, name, owner)
	if err != nil {
		return shorten.Domain{}, mapErr(err, "update domain")
	}
	if n, err := res.RowsAffected(); err != nil {
		return shorten.Domain{}, mapErr(err, "update domain")
	} else if n == 0 {
		return shorten.Domain{}, apperr.New(apperr.NotFound, "domain %q not found", name)
	}
	return db.domain(ctx, nil, name, owner)
}

// VerifyDomain implements shorten.DomainStore.
func (db *DB) VerifyDomain(ctx context.Context, name, owner string, at time.Time) (shorten.Domain, error) {
	var out shorten.Domain
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		if err := db.lockDomainWrites(ctx, tx); err != nil {
			return mapErr(err, "lock domains")
		}
		claims, err := db.domainRows(ctx, tx, `WHERE domain = ?`, name)
		if err != nil {
			return err
		}
		mine := -1
		for i, c := range claims {
			if c.Owner == owner {
				mine = i
			} else if c.Verified() {
				return errDomainTaken(name, "is already verified by another caller")
			}
		}
		if mine < 0 {
			return apperr.New(apperr.NotFound, "domain %q not found", name)
		}
		out = claims[mine]
		if out.Verified() {
			return nil
		}
		out.VerifiedAt = at.Truncate(time.Microsecond).UTC()
		if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE domains SET verified_at = ? WHERE domain = ? AND owner = ?`),
			toMicros(out.VerifiedAt), name, owner); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, db.Rebind(`DELETE FROM domains WHERE domain = ? AND owner <> ?`), name, owner)
		return err
	})
	if err != nil {
		return shorten.Domain{}, mapErr(err, "verify domain")
	}
	return out, nil
}

// DeleteDomain implements shorten.DomainStore: a domain that still has
// links is kept (Conflict), so no link is left on a host that no longer
// routes to it. The row goes first, then the links are looked for: on
// PostgreSQL the DELETE waits for a CreateLinks holding the row (its
// lockDomains) and the look then sees that transaction's links, while a
// CreateLinks that comes after the DELETE finds no domain. Links are only
// ever on a verified domain, so an unverified claim goes at once.
func (db *DB) DeleteDomain(ctx context.Context, name, owner string) error {
	return db.InTx(ctx, func(tx *sql.Tx) error {
		var verified *int64
		err := tx.QueryRowContext(ctx, db.Rebind(`DELETE FROM domains WHERE domain = ? AND owner = ? RETURNING verified_at`), name, owner).Scan(&verified)
		if errors.Is(err, sql.ErrNoRows) {
			return apperr.New(apperr.NotFound, "domain %q not found", name)
		}
		if err != nil {
			return mapErr(err, "delete domain")
		}
		if verified == nil {
			return nil
		}
		var one int
		err = tx.QueryRowContext(ctx, db.Rebind(`SELECT 1 FROM links WHERE domain = ? LIMIT 1`), name).Scan(&one)
		if err == nil {
			return &apperr.Error{Code: apperr.Conflict, Message: "the domain still has links: delete them first",
				Fields: []apperr.FieldError{{Field: "domain", Detail: "\"" + name + "\" has links"}}}
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return mapErr(err, "delete domain")
		}
		return nil
	})
}
