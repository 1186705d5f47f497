// Package panics recovers the panics of code that runs on a client's
// input (an HTTP or gRPC call, a queued job, a batch of recorded clicks,
// a message from another node), so that one bad input ends its own call
// or item with an internal error instead of ending the process. Each
// panic is logged once, at error level, with its stack, and counted by
// the surface it happened on (cmd/sluice binds the count to
// sluice_panics_total{surface}).
//
// The package imports only the standard library, so domain packages use
// it as well as adapters.
package panics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
)

// The surfaces, the values of sluice_panics_total's surface label.
const (
	// HTTP is the HTTP API's handlers, its Server-Sent Events streams
	// (inbox, live link stats) included: they run on the request.
	HTTP = "http"
	// Gateway is the rate limiting reverse proxy's handler.
	Gateway = "gateway"
	// GRPC is every gRPC method, unary and streaming.
	GRPC = "grpc"
	// Worker is the notification workers, one job at a time.
	Worker = "worker"
	// Clicks is the link click recorder's flushes, one batch at a time.
	Clicks = "clicks"
	// Announce is the handling of one announcement from another node
	// (links created or deleted, domains, inbox events, rate limit rules
	// and resets) or of one message of live link hits.
	Announce = "announce"
	// Workflow is the workflow scheduler, one run's advance at a time.
	Workflow = "workflow"
)

// Surfaces lists every surface, for metrics to start at zero.
var Surfaces = []string{HTTP, Gateway, GRPC, Worker, Clicks, Announce, Workflow}

// ErrRecovered is what [Reporter.Do] returns, wrapped with the panic's
// value, when its function panicked.
var ErrRecovered = errors.New("panic recovered")

// logKeyPanic, logKeySurface and logKeyStack are the log attributes of a
// recovered panic.
const (
	logKeyPanic   = "panic"
	logKeySurface = "surface"
	logKeyStack   = "stack"
)

// Reporter logs and counts recovered panics. A nil *Reporter, like the
// zero value, logs to slog.Default() and counts nothing. It is safe for
// concurrent use.
type Reporter struct {
	// Logger receives one error record per panic, with its stack. If nil,
	// slog.Default().
	Logger *slog.Logger
	// Count, if set, is told the surface of every panic.
	Count func(surface string)
}

// Report logs v, a value recover returned on surface, once, with the
// current goroutine's stack (called while the panic unwinds, the stack
// shows where it started) and attrs, and counts it.
func (r *Reporter) Report(ctx context.Context, surface string, v any, attrs ...slog.Attr) {
	log := slog.Default()
	if r != nil && r.Logger != nil {
		log = r.Logger
	}
	all := make([]slog.Attr, 0, len(attrs)+3)
	all = append(all, slog.String(logKeySurface, surface), slog.String(logKeyPanic, fmt.Sprint(v)))
	all = append(all, attrs...)
	all = append(all, slog.String(logKeyStack, string(debug.Stack())))
	log.LogAttrs(ctx, slog.LevelError, "panic recovered", all...)
	if r != nil && r.Count != nil {
		r.Count(surface)
	}
}

// Do calls fn and returns its error. If fn panics, Do reports the panic
// on surface (with attrs) and returns an error wrapping [ErrRecovered].
func (r *Reporter) Do(ctx context.Context, surface string, fn func() error, attrs ...slog.Attr) (err error) {
	defer func() {
		if v := recover(); v != nil {
			r.Report(ctx, surface, v, attrs...)
			err = fmt.Errorf("%w: %v", ErrRecovered, v)
		}
	}()
	return fn()
}

// Func returns fn, its panics recovered and reported on surface: for a
// callback that handles one item (a message from another node) on a
// goroutine the caller does not own, where a panic would end the process.
func Func[T any](r *Reporter, surface string, fn func(T)) func(T) {
	return func(v T) {
		_ = r.Do(context.Background(), surface, func() error { fn(v); return nil })
	}
}
