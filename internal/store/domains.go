package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.DomainStore = (*DB)(nil)

const domainColumns = "domain, owner, fallback_url, created_at"

// CreateDomain implements shorten.DomainStore.
func (db *DB) CreateDomain(ctx context.Context, d shorten.Domain) (shorten.Domain, error) {
	d.CreatedAt = d.CreatedAt.Truncate(time.Microsecond).UTC()
	var taken bool
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.Rebind(`INSERT INTO domains (`+domainColumns+`) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`),
			d.Name, d.Owner, d.FallbackURL, toMicros(d.CreatedAt))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		taken = n == 0
		return err
	})
	if err != nil {
		return shorten.Domain{}, mapErr(err, "create domain")
	}
	if taken {
		return shorten.Domain{}, &apperr.Error{Code: apperr.Conflict, Message: "the domain is already registered",
			Fields: []apperr.FieldError{{Field: "domain", Detail: "\"" + d.Name + "\" is already registered"}}}
	}
	return d, nil
}

// Domains implements shorten.DomainStore.
func (db *DB) Domains(ctx context.Context, limit int) ([]shorten.Domain, error) {
	rows, err := db.query(ctx, `SELECT `+domainColumns+` FROM domains ORDER BY domain LIMIT ?`, limit)
	if err != nil {
		return nil, mapErr(err, "list domains")
	}
	defer rows.Close()
	out := []shorten.Domain{}
	for rows.Next() {
		var (
			d       shorten.Domain
			created int64
		)
		if err := rows.Scan(&d.Name, &d.Owner, &d.FallbackURL, &created); err != nil {
			return nil, mapErr(err, "list domains")
		}
		d.CreatedAt = fromMicros(&created)
		out = append(out, d)
	}
	return out, mapErr(rows.Err(), "list domains")
}

// Domain implements shorten.DomainStore.
func (db *DB) Domain(ctx context.Context, name string) (shorten.Domain, error) {
	var (
		d       shorten.Domain
		created int64
	)
	err := db.queryRow(ctx, `SELECT `+domainColumns+` FROM domains WHERE domain = ?`, name).Scan(&d.Name, &d.Owner, &d.FallbackURL, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return shorten.Domain{}, apperr.New(apperr.NotFound, "domain %q not found", name)
	}
	if err != nil {
		return shorten.Domain{}, mapErr(err, "get domain")
	}
	d.CreatedAt = fromMicros(&created)
	return d, nil
}

// UpdateDomain implements shorten.DomainStore.
func (db *DB) UpdateDomain(ctx context.Context, name, fallbackURL string) (shorten.Domain, error) {
	res, err := db.exec(ctx, `UPDATE domains SET fallback_url = ? WHERE domain = ?`, fallbackURL, name)
	if err != nil {
		return shorten.Domain{}, mapErr(err, "update domain")
	}
	if n, err := res.RowsAffected(); err != nil {
		return shorten.Domain{}, mapErr(err, "update domain")
	} else if n == 0 {
		return shorten.Domain{}, apperr.New(apperr.NotFound, "domain %q not found", name)
	}
	return db.Domain(ctx, name)
}

// DeleteDomain implements shorten.DomainStore: a domain that still has
// links is kept (Conflict), so no link is left on a host that no longer
// routes to it. The row goes first, then the links are looked for: on
// PostgreSQL the DELETE waits for a CreateLinks holding the row (its
// lockDomains) and the look then sees that transaction's links, while a
// CreateLinks that comes after the DELETE finds no domain.
func (db *DB) DeleteDomain(ctx context.Context, name string) error {
	return db.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, db.Rebind(`DELETE FROM domains WHERE domain = ?`), name)
		if err != nil {
			return mapErr(err, "delete domain")
		}
		if n, err := res.RowsAffected(); err != nil {
			return mapErr(err, "delete domain")
		} else if n == 0 {
			return apperr.New(apperr.NotFound, "domain %q not found", name)
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
