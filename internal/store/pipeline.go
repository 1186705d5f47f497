package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Pipelined group commit on PostgreSQL: one round trip per transaction.
// See the package doc, "Pipelined group commit on PostgreSQL".

// pgWrite is the pipelined form of a write: it queues the write's
// statements on b and returns a reader that consumes exactly their results,
// in order, and keeps what the caller needs from them. Like batchOp.fn it
// may run in a batch that is rolled back, after which fn runs: the reader
// sets every result it reports, and fn resets them.
//
// The reader should fail only when a statement did: COMMIT is already on
// its way when it reads, so a reader that fails on results the server
// accepted leaves the batch's outcome unknown (see errOutcomeUnknown).
type pgWrite func(b *pgx.Batch) func(br pgx.BatchResults) error

// errOutcomeUnknown reports a pipelined batch that the server ran to its
// end, COMMIT included, while a reader failed, so COMMIT's result was never
// read. Its writes may be committed: running them again could apply them
// twice, so each caller gets this error instead.
var errOutcomeUnknown = errors.New("pipelined transaction: outcome unknown")

// pipelined reports whether batch can run as one pipelined transaction:
// on PostgreSQL, when every op has a pipelined form.
func (g *groupCommitter) pipelined(batch []*batchOp) bool {
	if g.db.dialect != DialectPostgres {
		return false
	}
	for _, op := range batch {
		if op.pg == nil {
			return false
		}
	}
	return true
}

// commitPipelined runs batch in one transaction sent as one pgx batch on a
// connection of the write pool. It returns nil when the transaction
// committed; errOutcomeUnknown (wrapped) when it may have; otherwise an
// error, and nothing was written.
func (g *groupCommitter) commitPipelined(ctx context.Context, batch []*batchOp) error {
	conn, err := g.db.write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		return sendPipelined(ctx, dc.(*stdlib.Conn).Conn(), batch)
	})
}

// sendPipelined runs batch on pc. An error wrapping driver.ErrBadConn
// tells database/sql to discard the connection, which is left inside a
// transaction it could not roll back.
func sendPipelined(ctx context.Context, pc *pgx.Conn, batch []*batchOp) error {
	var b pgx.Batch
	b.Queue("BEGIN")
	readers := make([]func(pgx.BatchResults) error, len(batch))
	for i, op := range batch {
		readers[i] = op.pg(&b)
	}
	b.Queue("COMMIT")

	br := pc.SendBatch(ctx, &b)
	// A statement that cannot be prepared or an argument that cannot be
	// encoded fails the batch before anything is sent: BEGIN fails then.
	_, err := br.Exec()
	begun := err == nil
	for _, read := range readers {
		if err != nil {
			break
		}
		err = read(br)
	}
	commitRead := false
	if err == nil {
		var ct pgconn.CommandTag
		ct, err = br.Exec()
		commitRead = true
		if err == nil && ct.String() != "COMMIT" {
			// Only an aborted transaction answers otherwise, and a
			// statement would have failed first; be sure anyway.
			err = fmt.Errorf("commit answered %q", ct)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		return nil
	}

	switch {
	case pc.IsClosed():
		// The connection broke (pgx closes it when it cannot read on):
		// the server rolls back what it had not committed. As after a
		// failed database/sql commit, the writes run again.
		return err
	case pc.PgConn().TxStatus() != 'I':
		// A statement failed and the server skipped the rest, COMMIT
		// included: roll back.
		if _, rerr := pc.Exec(ctx, "ROLLBACK"); rerr != nil || pc.PgConn().TxStatus() != 'I' {
			return errors.Join(err, rerr, driver.ErrBadConn)
		}
		return err
	case !begun, commitRead:
		return err // nothing ran, or COMMIT failed and the server rolled back
	default:
		return fmt.Errorf("%w: %w", errOutcomeUnknown, err)
	}
}

// pgCount returns the pipelined form of a write done by one statement, q
// with args, that selects a count: the reader passes it to set.
func pgCount(q string, args []any, set func(n int64)) pgWrite {
	return func(b *pgx.Batch) func(pgx.BatchResults) error {
		b.Queue(q, args...)
		return func(br pgx.BatchResults) error {
			var n int64
			if err := br.QueryRow().Scan(&n); err != nil {
				return err
			}
			set(n)
			return nil
		}
	}
}

// writeChanged runs query, one INSERT or UPDATE with args, as a
// group-committed write (pipelined on PostgreSQL, where it is counted
// through RETURNING) and reports whether it changed a row.
func (db *DB) writeChanged(ctx context.Context, urgent bool, query string, args []any) (bool, error) {
	stmt, err := db.writeStmt(ctx, db.Rebind(query))
	if err != nil {
		return false, err
	}
	var changed bool
	fn := func(ctx context.Context, tx *sql.Tx) error {
		changed = false
		res, err := stmt.exec(ctx, tx, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		changed = err == nil && n > 0
		return err
	}
	var pg pgWrite
	if db.dialect == DialectPostgres {
		q := db.Rebind(`WITH w AS (` + query + ` RETURNING 1) SELECT count(*) FROM w`)
		pg = pgCount(q, args, func(n int64) { changed = n > 0 })
	}
	err = db.pipelinedBatch(ctx, urgent, fn, pg)
	return changed, err
}
