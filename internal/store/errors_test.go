package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/apperr"
)

// TestMapErrTransient pins which engine errors are Unavailable and which of
// those are transient: the ones a creation retries inside the node.
func TestMapErrTransient(t *testing.T) {
	t.Parallel()
	// A real connect error: nothing listens on port 1.
	_, connectErr := pgconn.Connect(t.Context(), "postgres://sluice@127.0.0.1:1/sluice?connect_timeout=5")
	if _, ok := errors.AsType[*pgconn.ConnectError](connectErr); !ok {
		t.Fatalf("connect to port 1 = %v, want a *pgconn.ConnectError", connectErr)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	pg := func(code, msg string) error { return &pgconn.PgError{Severity: "FATAL", Code: code, Message: msg} }
	tests := []struct {
		name      string
		err       error
		code      apperr.Code
		transient bool
	}{
		{"connect refused", connectErr, apperr.Unavailable, true},
		{"dial refused", refused, apperr.Unavailable, true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), apperr.Unavailable, true},
		{"dropped mid-answer", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), apperr.Unavailable, true},
		{"bad pooled connection", driver.ErrBadConn, apperr.Unavailable, true},
		{"pgx conn closed", fmt.Errorf("query: %w", pgconn.ErrConnClosed), apperr.Unavailable, true},
		{"admin shutdown", pg("57P01", "terminating connection due to administrator command"), apperr.Unavailable, true},
		{"crash shutdown", pg("57P02", "terminating connection because of crash of another server process"), apperr.Unavailable, true},
		{"starting up", pg("57P03", "the database system is starting up"), apperr.Unavailable, true},
		{"connection exception class", pg("08006", "connection failure"), apperr.Unavailable, true},
		{"outcome unknown after a drop", fmt.Errorf("%w: %w", errOutcomeUnknown, io.ErrUnexpectedEOF), apperr.Unavailable, true},
		{"too many connections", pg("53300", "sorry, too many clients already"), apperr.Unavailable, false},
		{"statement timeout", pg("57014", "canceling statement due to statement timeout"), apperr.Unavailable, false},
		{"caller's deadline", context.DeadlineExceeded, apperr.Unavailable, false},
		{"caller cancelled", context.Canceled, apperr.Internal, false},
		{"database closed", errors.New("sql: database is closed"), apperr.Unavailable, false},
		{"unique violation", pg("23505", "duplicate key value violates unique constraint"), apperr.Conflict, false},
		{"check violation", pg("23514", "new row violates check constraint"), apperr.Internal, false},
		{"syntax error", pg("42601", "syntax error"), apperr.Internal, false},
		{"already an apperr", apperr.New(apperr.NotFound, "no such link"), apperr.NotFound, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := mapErr(tt.err, "create link")
			if got := apperr.CodeOf(err); got != tt.code {
				t.Errorf("CodeOf(mapErr(%v)) = %q, want %q", tt.err, got, tt.code)
			}
			if got := apperr.IsTransient(err); got != tt.transient {
				t.Errorf("IsTransient(mapErr(%v)) = %v, want %v", tt.err, got, tt.transient)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("mapErr(%v) lost its cause", tt.err)
			}
		})
	}
}
