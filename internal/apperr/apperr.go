// Package apperr is Sluice's one application error type. Domain and storage
// code return *Error values carrying a Code; the HTTP and gRPC edges map the
// code to a status in one table and show the client only Message and Fields,
// never the wrapped Err, which is for logs.
package apperr

import (
	"errors"
	"fmt"
)

// Code classifies an error for the edges. The zero Code is Internal.
type Code string

// The codes callers test for and the edges map to statuses.
const (
	Internal      Code = "internal"      // 500: a bug or an engine failure
	Invalid       Code = "invalid"       // 400: malformed request
	Unprocessable Code = "unprocessable" // 422: well-formed but breaks a rule
	NotFound      Code = "not_found"     // 404
	Conflict      Code = "conflict"      // 409
	Unauthorized  Code = "unauthorized"  // 401
	Forbidden     Code = "forbidden"     // 403
	Unavailable   Code = "unavailable"   // 503: an engine is down; retry later
	Gone          Code = "gone"          // 410
	TooMany       Code = "too_many"      // 429: a bound on what one client may hold
	// UnsupportedMedia is a request body in a format the endpoint does not read (415).
	UnsupportedMedia Code = "unsupported_media"
)

// FieldError names one bad input field and why it is bad.
type FieldError struct {
	Field  string `json:"field"`  // dotted path, e.g. "policy.limit"
	Detail string `json:"detail"` // why it is bad, e.g. "must be positive"
}

// Error is an application error. Message is safe to show to clients; Err is
// the underlying cause, logged but never sent.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
	Err     error
}

func (e *Error) Error() string {
	switch {
	case e.Err != nil && e.Message != "":
		return e.Message + ": " + e.Err.Error()
	case e.Err != nil:
		return e.Err.Error()
	default:
		return e.Message
	}
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error with a formatted client-facing message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error that keeps err as its logged cause.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// Fields returns an Unprocessable error listing the bad fields. It returns nil
// when fields is empty, so validators can end with `return apperr.Fields(...)`.
func Fields(code Code, message string, fields []FieldError) error {
	if len(fields) == 0 {
		return nil
	}
	return &Error{Code: code, Message: message, Fields: fields}
}

// CodeOf reports the Code of the first *Error in err's chain, or Internal.
func CodeOf(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok && e.Code != "" {
		return e.Code
	}
	return Internal
}

// Is reports whether err carries code.
func Is(err error, code Code) bool { return err != nil && CodeOf(err) == code }
