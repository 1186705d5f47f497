package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

var _ shorten.Store = (*DB)(nil)

// linkColumns is the column list every links read selects, in scanLink's
// order.
const linkColumns = "id, domain, code, url, owner, notification_id, created_at, expires_at, clicks, bot_hits, first_click_at, rules, " + linkExtraColumns

// linkExtraColumns are the columns of migration 0018 every links read
// selects after the original ones, in scanLink's order.
const linkExtraColumns = "max_visits, visits, fallback_url, click_ids, conversions"

// insertChunk bounds the rows of one multi-row INSERT, well inside both
// engines' limits on bound parameters.
const insertChunk = 500

// CreateLinks implements shorten.Store. Ids come from links_id_seq on
// PostgreSQL and from the one-row link_ids counter on SQLite, the only
// difference between the engines; the rest is one multi-row INSERT ... ON
// CONFLICT DO NOTHING RETURNING id per chunk, in one transaction, so a
// batch of creations costs one commit.
//
// A transient failure (apperr.ErrTransient) is retried for up to
// Options.LinkCreateRetry, never past ctx's deadline, without ever making
// a link twice: on PostgreSQL every attempt after the one that reserved
// ids reuses them (a sequence never hands an id out twice, even when the
// transaction that took it rolled back), so the links keep their ids and
// codes, and an attempt whose COMMIT reached the server but whose answer
// was lost (the connection dropped) left rows under exactly those ids. The
// next attempt's INSERT then skips them (ON CONFLICT) and, finding each
// one under its own id, counts it created: it is this call's link, stored
// once, whatever the first attempt's fate. A custom code taken by a row
// with another id is taken for real. SQLite has no transient failures
// (isTransient): its attempt is always the first.
func (db *DB) CreateLinks(ctx context.Context, links []shorten.NewLink, code func(id int64) (string, error)) ([]shorten.Link, []bool, error) {
	c := &linkCreate{links: links, code: code, out: make([]shorten.Link, len(links)), created: make([]bool, len(links))}
	if len(links) == 0 {
		return c.out, c.created, nil
	}
	attempts := 0
	err := apperr.RetryTransient(ctx, time.Now().Add(db.linkCreateRetry), func() error {
		attempts++
		return db.createLinksAttempt(ctx, c, attempts > 1)
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range c.out {
		if !c.created[i] {
			c.out[i] = shorten.Link{}
		}
	}
	return c.out, c.created, nil
}

// linkCreate is one CreateLinks call, kept across its attempts.
type linkCreate struct {
	links   []shorten.NewLink
	code    func(id int64) (string, error)
	ids     []int64 // reserved by an earlier attempt (PostgreSQL); nil before
	out     []shorten.Link
	created []bool
}

// createLinksAttempt runs one attempt of c in a transaction of its own;
// again says an earlier attempt failed, perhaps after its COMMIT reached
// the server.
func (db *DB) createLinksAttempt(ctx context.Context, c *linkCreate, again bool) error {
	clear(c.created)
	return mapErr(db.InTx(ctx, func(tx *sql.Tx) error {
		if c.ids == nil || db.dialect != DialectPostgres {
			ids, err := db.reserveLinkIDs(ctx, tx, len(c.links))
			if err != nil {
				return err
			}
			c.ids = ids
		}
		registered, err := db.lockDomains(ctx, tx, c.links)
		if err != nil {
			return err
		}
		byID := make(map[int64]int, len(c.links))
		for i, l := range c.links {
			code := l.Code
			if code == "" {
				var err error
				if code, err = c.code(c.ids[i]); err != nil {
					return fmt.Errorf("code for link %d: %w", c.ids[i], err)
				}
			}
			c.out[i] = shorten.Link{ID: c.ids[i], Domain: l.Domain, Code: code, URL: l.URL, Owner: l.Owner, NotificationID: l.NotificationID,
				CreatedAt: l.CreatedAt.Truncate(time.Microsecond).UTC(), ExpiresAt: utcMicros(l.ExpiresAt), LinkExtras: l.LinkExtras}
			byID[c.ids[i]] = i
		}
		toInsert := c.out
		if registered != nil { // some links name a domain: those on none registered are left out
			toInsert = slices.DeleteFunc(slices.Clone(c.out), func(l shorten.Link) bool { return l.Domain != "" && !registered[l.Domain] })
		}
		for chunk := range slices.Chunk(toInsert, insertChunk) {
			if err := db.insertLinks(ctx, tx, chunk, byID, c.created); err != nil {
				return err
			}
		}
		if again {
			return db.findOwnLinks(ctx, tx, byID, c.created)
		}
		return nil
	}), "create links")
}

// lockDomains returns which of the custom domains links name are
// registered and verified (nil when they name none), holding each found row against a
// concurrent DeleteDomain until tx ends (FOR SHARE on PostgreSQL; SQLite
// transactions are serialised): so a link never lands on a domain being
// removed, whichever commits first.
func (db *DB) lockDomains(ctx context.Context, tx *sql.Tx, links []shorten.NewLink) (map[string]bool, error) {
	var names []any
	seen := map[string]bool{}
	for _, l := range links {
		if l.Domain != "" && !seen[l.Domain] {
			seen[l.Domain] = true
			names = append(names, l.Domain)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	q := "SELECT domain FROM domains WHERE domain IN (" + marks(len(names)) + ") AND verified_at IS NOT NULL"
	if db.dialect == DialectPostgres {
		q += " FOR SHARE"
	}
	rows, err := tx.QueryContext(ctx, db.Rebind(q), names...)
	if err != nil {
		return nil, mapErr(err, "lock link domains")
	}
	defer rows.Close()
	registered := make(map[string]bool, len(names))
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, mapErr(err, "lock link domains")
		}
		registered[d] = true
	}
	return registered, mapErr(rows.Err(), "lock link domains")
}

// findOwnLinks sets created for the links of byID (id -> index) that a
// retried CreateLinks did not insert but that are stored under their own
// id: an earlier attempt of the same call committed them (see CreateLinks).
func (db *DB) findOwnLinks(ctx context.Context, tx *sql.Tx, byID map[int64]int, created []bool) error {
	var missing []any
	for id, i := range byID {
		if !created[i] {
			missing = append(missing, id)
		}
	}
	for chunk := range slices.Chunk(missing, insertChunk) {
		q := "SELECT id FROM links WHERE id IN (" + marks(len(chunk)) + ")"
		rows, err := tx.QueryContext(ctx, db.Rebind(q), chunk...)
		if err != nil {
			return mapErr(err, "find links of an earlier attempt")
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return mapErr(err, "find links of an earlier attempt")
			}
			created[byID[id]] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return mapErr(err, "find links of an earlier attempt")
		}
	}
	return nil
}

func (db *DB) reserveLinkIDs(ctx context.Context, tx *sql.Tx, n int) ([]int64, error) {
	ids := make([]int64, 0, n)
	if db.dialect == DialectPostgres {
		rows, err := tx.QueryContext(ctx, "SELECT nextval('links_id_seq') FROM generate_series(1, $1::integer)", n)
		if err != nil {
			return nil, mapErr(err, "reserve link ids")
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return nil, mapErr(err, "reserve link ids")
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return nil, mapErr(err, "reserve link ids")
		}
	} else {
		var next int64
		err := tx.QueryRowContext(ctx, "UPDATE link_ids SET next = next + ? WHERE one = 1 RETURNING next", n).Scan(&next)
		if err != nil {
			return nil, mapErr(err, "reserve link ids")
		}
		for id := next - int64(n); id < next; id++ {
			ids = append(ids, id)
		}
	}
	if len(ids) != n {
		return nil, fmt.Errorf("reserve link ids: got %d of %d", len(ids), n)
	}
	return ids, nil
}

func (db *DB) insertLinks(ctx context.Context, tx *sql.Tx, links []shorten.Link, byID map[int64]int, created []bool) error {
	var q strings.Builder
	q.WriteString("INSERT INTO links (id, domain, code, url, owner, notification_id, created_at, expires_at, max_visits, fallback_url, click_ids, rolled_up) VALUES ")
	args := make([]any, 0, len(links)*11)
	for i, l := range links {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)")
		args = append(args, l.ID, l.Domain, l.Code, l.URL, l.Owner, nullString(l.NotificationID), toMicros(l.CreatedAt), toMicros(l.ExpiresAt),
			nullPositive(l.MaxVisits), l.FallbackURL, boolInt(l.ClickIDs))
	}
	q.WriteString(" ON CONFLICT DO NOTHING RETURNING id")
	rows, err := tx.QueryContext(ctx, db.Rebind(q.String()), args...)
	if err != nil {
		return mapErr(err, "insert links")
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return mapErr(err, "insert links")
		}
		if i, ok := byID[id]; ok {
			created[i] = true
		}
	}
	return mapErr(rows.Err(), "insert links")
}

// LinkByCode implements shorten.Store.
func (db *DB) LinkByCode(ctx context.Context, domain, code string) (shorten.Link, error) {
	l, err := scanLink(db.queryRow(ctx, `SELECT `+linkColumns+` FROM links WHERE domain = ? AND code = ?`, domain, code))
	if errors.Is(err, sql.ErrNoRows) {
		return shorten.Link{}, apperr.New(apperr.NotFound, "link %q not found", code)
	}
	return l, mapErr(err, "get link")
}

// NotificationLink implements shorten.Store.
func (db *DB) NotificationLink(ctx context.Context, notificationID, url string) (shorten.Link, error) {
	l, err := scanLink(db.queryRow(ctx, `SELECT `+linkColumns+` FROM links WHERE notification_id = ? AND url = ?`, notificationID, url))
	if errors.Is(err, sql.ErrNoRows) {
		return shorten.Link{}, apperr.New(apperr.NotFound, "notification %q has no link to that URL", notificationID)
	}
	return l, mapErr(err, "get notification link")
}

// NotificationLinks implements shorten.Store.
func (db *DB) NotificationLinks(ctx context.Context, notificationID string) ([]shorten.Link, error) {
	return db.queryLinks(ctx, "list notification links",
		`SELECT `+linkColumns+` FROM links WHERE notification_id = ? ORDER BY id`, notificationID)
}

// ListLinks implements shorten.Store.
func (db *DB) ListLinks(ctx context.Context, owner string, domain *string, before int64, limit int) ([]shorten.Link, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	if domain != nil {
		return db.queryLinks(ctx, "list links",
			`SELECT `+linkColumns+` FROM links WHERE owner = ? AND domain = ? AND id < ? ORDER BY id DESC LIMIT ?`, owner, *domain, before, limit)
	}
	return db.queryLinks(ctx, "list links",
		`SELECT `+linkColumns+` FROM links WHERE owner = ? AND id < ? ORDER BY id DESC LIMIT ?`, owner, before, limit)
}

func (db *DB) queryLinks(ctx context.Context, op, q string, args ...any) ([]shorten.Link, error) {
	rows, err := db.query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err, op)
	}
	return appendRows([]shorten.Link{}, rows, op, scanLink)
}

// DeleteLink implements shorten.Store.
func (db *DB) DeleteLink(ctx context.Context, domain, code string) error {
	return db.InTx(ctx, func(tx *sql.Tx) error {
		var id int64
		err := tx.QueryRowContext(ctx, db.Rebind("DELETE FROM links WHERE domain = ? AND code = ? RETURNING id"), domain, code).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return apperr.New(apperr.NotFound, "link %q not found", code)
		}
		if err != nil {
			return mapErr(err, "delete link")
		}
		_, err = tx.ExecContext(ctx, db.Rebind("DELETE FROM link_clicks WHERE link_id = ?"), id)
		if err != nil {
			return mapErr(err, "delete link clicks")
		}
		return db.deleteLinkAnalytics(ctx, tx, []any{id})
	})
}

// PurgeExpiredLinks implements shorten.Store.
func (db *DB) PurgeExpiredLinks(ctx context.Context, before time.Time, limit int) (int, error) {
	n := 0
	err := db.backgroundTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, db.Rebind(`DELETE FROM links WHERE id IN
			(SELECT id FROM links WHERE expires_at < ? ORDER BY expires_at LIMIT ?) RETURNING id`), before.UnixMicro(), limit)
		if err != nil {
			return mapErr(err, "purge links")
		}
		var ids []any
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return mapErr(err, "purge links")
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return mapErr(err, "purge links")
		}
		n = len(ids)
		for chunk := range slices.Chunk(ids, insertChunk) {
			q := "DELETE FROM link_clicks WHERE link_id IN (" + marks(len(chunk)) + ")"
			if _, err := tx.ExecContext(ctx, db.Rebind(q), chunk...); err != nil {
				return mapErr(err, "purge link clicks")
			}
			if err := db.deleteLinkAnalytics(ctx, tx, chunk); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

func scanLink(row interface{ Scan(...any) error }) (shorten.Link, error) {
	var (
		l              shorten.Link
		notif          *string
		created        int64
		expires, first *int64
		rules          *string
		maxVisits      *int64
		clickIDs       int64
	)
	if err := row.Scan(&l.ID, &l.Domain, &l.Code, &l.URL, &l.Owner, &notif, &created, &expires, &l.Clicks, &l.BotHits, &first, &rules,
		&maxVisits, &l.Visits, &l.FallbackURL, &clickIDs, &l.Conversions); err != nil {
		return shorten.Link{}, err
	}
	var err error
	if l.Rules, err = decodeLinkRules(rules); err != nil {
		return shorten.Link{}, err
	}
	if notif != nil {
		l.NotificationID = *notif
	}
	l.CreatedAt = fromMicros(&created)
	l.ExpiresAt = fromMicros(expires)
	l.FirstClickAt = fromMicros(first)
	if maxVisits != nil {
		l.MaxVisits = *maxVisits
	}
	l.ClickIDs = clickIDs != 0
	return l, nil
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func utcMicros(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(time.Microsecond).UTC()
}
