package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sluicehq/sluice/internal/apperr"
)

// unavailableMessage is what clients are told when an engine is down.
const unavailableMessage = "database unavailable"

// timeoutMessage is what clients are told when PostgreSQL cancelled a
// statement that ran past statement_timeout (or lock_timeout, if the
// operator set one).
const timeoutMessage = "the database did not answer within its statement timeout (database_statement_timeout); retry later"

// mapErr wraps err from the engine with op, a short lowercase description of
// what was being done ("create api key"), and gives it the apperr code the
// edge needs: Conflict for unique violations, Unavailable when the engine
// cannot be reached or cancelled a statement past its timeout, Internal (a
// plain wrapped error) otherwise. An Unavailable error that a moment's wait
// may cure (isTransient) is also marked apperr.ErrTransient, for the callers
// that retry. Errors that already carry an apperr code keep it.
// mapErr(nil, op) is nil.
func mapErr(err error, op string) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*apperr.Error](err); ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	cause := fmt.Errorf("%s: %w", op, err)
	switch {
	case isUniqueViolation(err):
		return apperr.Wrap(apperr.Conflict, cause, "%s: already exists", op)
	case isTimeout(err):
		return apperr.Wrap(apperr.Unavailable, cause, timeoutMessage)
	case isTransient(err):
		return apperr.Wrap(apperr.Unavailable, apperr.MarkTransient(cause), unavailableMessage)
	case isUnavailable(err):
		return apperr.Wrap(apperr.Unavailable, cause, unavailableMessage)
	default:
		return cause
	}
}

// isUniqueViolation reports a UNIQUE or PRIMARY KEY violation on either
// engine.
func isUniqueViolation(err error) bool {
	if e, ok := errors.AsType[*sqlite.Error](err); ok {
		c := e.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	if e, ok := errors.AsType[*pgconn.PgError](err); ok {
		return e.Code == "23505" // unique_violation
	}
	return false
}

// isTimeout reports a PostgreSQL statement the server cancelled past a
// timeout: query_canceled by statement_timeout, or lock_not_available
// (lock_timeout). Neither means the request was wrong: the database did
// not answer in time. A query_canceled answering a cancel request (pgx
// sends one when a context ends) is not a timeout of the server's; the
// context's own error says what happened.
func isTimeout(err error) bool {
	if e, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch e.Code {
		case "57014":
			return strings.Contains(e.Message, "statement timeout")
		case "55P03":
			return true
		}
	}
	return false
}

// isConflict reports a transaction PostgreSQL rolled back because it
// conflicted with another (deadlock_detected 40P01, serialization_failure
// 40001): nothing of it was written, and running it again alone succeeds.
func isConflict(err error) bool {
	if e, ok := errors.AsType[*pgconn.PgError](err); ok {
		return e.Code == "40P01" || e.Code == "40001"
	}
	return false
}

// isTransient reports the failures a moment's wait may cure, which callers
// whose work is safe to repeat retry (apperr.RetryTransient): the engine's
// connection refused, reset or dropped, PostgreSQL shutting down, crashed
// or starting up (SQLSTATE 57P01, 57P02, 57P03) or any connection_exception
// (class 08), and a failed connect. This is the one place that decides it.
// Not transient: constraint violations and other SQL errors, a statement
// timeout (the database already had its time), too_many_connections (a
// retry adds to the load), SQLite busy or full (busy_timeout already
// waited), a closed *sql.DB (the node is stopping) and a context that
// ended (the caller gave up).
func isTransient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if e, ok := errors.AsType[*pgconn.PgError](err); ok { // also inside a ConnectError
		switch {
		case strings.HasPrefix(e.Code, "08"): // connection_exception class
			return true
		case e.Code == "57P01", e.Code == "57P02", e.Code == "57P03":
			// admin_shutdown, crash_shutdown, cannot_connect_now
			return true
		}
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if _, ok := errors.AsType[*sqlite.Error](err); ok {
		return false
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, pgconn.ErrConnClosed):
		return true
	}
	_, ok := errors.AsType[net.Error](err)
	return ok
}

// isUnavailable reports errors that mean "the engine cannot serve now; try
// again later" as opposed to a bug or a bad request: refused or dropped
// connections, PostgreSQL shutting down or out of connections, SQLite still
// locked after busy_timeout or out of disk, and a closed *sql.DB.
func isUnavailable(err error) bool {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if e, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case strings.HasPrefix(e.Code, "08"): // connection_exception class
			return true
		case e.Code == "57P01", e.Code == "57P02", e.Code == "57P03", e.Code == "53300":
			// admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections
			return true
		}
		return false
	}
	if e, ok := errors.AsType[*sqlite.Error](err); ok {
		switch e.Code() & 0xff { // primary result code
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_FULL:
			return true
		}
		return false
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	if isTransient(err) {
		return true
	}
	// database/sql's errDBClosed is unexported; its text is stable since Go 1.0.
	return strings.Contains(err.Error(), "sql: database is closed")
}
