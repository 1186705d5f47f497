package store

import (
	"context"
	"database/sql"
	"math/bits"
	"strings"
	"sync"
)

// rowsChunk is the largest number of rows one multi-row statement of the
// click flusher writes (13 parameters a click row: 6,656, well inside
// both engines' limits).
const rowsChunk = 512

// multiRow is a multi-row INSERT: prefix, then row repeated once per row
// (comma separated), then suffix.
//
// The click flusher writes a batch as chunks of rowsChunk rows and its
// remainder as chunks of the powers of two that sum to it, so that every
// batch, whatever its size, runs statements of only 10 shapes. Each shape
// is prepared once on SQLite's write connection and reused (pgx caches
// them per connection on PostgreSQL): a statement built for the exact size
// of each chunk was parsed on every flush, a third of the flusher's CPU.
type multiRow struct {
	prefix, row, suffix string
}

// rowTexts remembers multiRow.text by multiRow, dialect and size: a
// flush asks for the same few shapes every time.
var rowTexts sync.Map // rowText -> string

type rowText struct {
	m       multiRow
	dialect string
	n       int
}

// text is the statement for n rows, rebound for the dialect.
func (m multiRow) text(db *DB, n int) string {
	key := rowText{m, db.dialect, n}
	if q, ok := rowTexts.Load(key); ok {
		return q.(string)
	}
	q := m.build(db, n)
	rowTexts.Store(key, q)
	return q
}

func (m multiRow) build(db *DB, n int) string {
	var q strings.Builder
	q.Grow(len(m.prefix) + n*(len(m.row)+2) + len(m.suffix))
	q.WriteString(m.prefix)
	for i := range n {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(m.row)
	}
	q.WriteString(m.suffix)
	return db.Rebind(q.String())
}

// chunkSizes returns the chunk sizes a batch of n rows is written in:
// rowsChunk as often as it fits, then the remainder's powers of two,
// largest first.
func chunkSizes(n int) []int {
	sizes := make([]int, 0, n/rowsChunk+bits.OnesCount(uint(n%rowsChunk)))
	for ; n >= rowsChunk; n -= rowsChunk {
		sizes = append(sizes, rowsChunk)
	}
	for n > 0 {
		p := 1 << (bits.Len(uint(n)) - 1)
		sizes = append(sizes, p)
		n -= p
	}
	return sizes
}

// rowStmts holds the prepared statements of a multiRow by size.
type rowStmts struct {
	m     multiRow
	bySz  map[int]stmt
	owner *DB
}

// prepareRows prepares, outside any transaction (on SQLite the statement
// takes the write connection), the statements a batch of n rows of m
// runs. Sizes a transaction asks for that were not prepared here (when
// rows were dropped meanwhile) run as plain text.
func (db *DB) prepareRows(ctx context.Context, m multiRow, n int) (rowStmts, error) {
	rs := rowStmts{m: m, bySz: map[int]stmt{}, owner: db}
	for _, sz := range chunkSizes(n) {
		if _, ok := rs.bySz[sz]; ok {
			continue
		}
		st, err := db.writeStmt(ctx, m.text(db, sz))
		if err != nil {
			return rowStmts{}, err
		}
		rs.bySz[sz] = st
	}
	return rs, nil
}

// exec writes n rows in tx: args(i, dst) appends row i's parameters to
// dst.
func (rs rowStmts) exec(ctx context.Context, tx *sql.Tx, n, perRow int, args func(i int, dst []any) []any) error {
	return rs.each(n, perRow, args, func(st stmt, params []any) error {
		_, err := st.exec(ctx, tx, params...)
		return err
	})
}

// query runs, in tx, the statements of n rows, which return rows, and
// hands each row they return to scan.
func (rs rowStmts) query(ctx context.Context, tx *sql.Tx, n, perRow int, args func(i int, dst []any) []any, scan func(*sql.Rows) error) error {
	return rs.each(n, perRow, args, func(st stmt, params []any) error {
		rows, err := st.query(ctx, tx, params...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// each calls run with each chunk's statement and parameters.
func (rs rowStmts) each(n, perRow int, args func(i int, dst []any) []any, run func(st stmt, params []any) error) error {
	buf := make([]any, 0, min(n, rowsChunk)*perRow)
	defer func() { clear(buf) }() // drop the references the last chunk held
	at := 0
	for _, sz := range chunkSizes(n) {
		st, ok := rs.bySz[sz]
		if !ok {
			st = stmt{q: rs.m.text(rs.owner, sz)}
		}
		buf = buf[:0]
		for i := at; i < at+sz; i++ {
			buf = args(i, buf)
		}
		if err := run(st, buf); err != nil {
			return err
		}
		at += sz
	}
	return nil
}
