package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/internal/apperr"
)

// ProblemBase prefixes every problem type URI; the last path segment names
// the kind of problem (e.g. ".../quota-exceeded").
const ProblemBase = "https://sluice.dev/problems/"

// Problem is an RFC 9457 problem details body. Extra members go in Ext.
type Problem struct {
	Type      string              `json:"type"`
	Title     string              `json:"title"`
	Status    int                 `json:"status"`
	Detail    string              `json:"detail,omitempty"`
	Instance  string              `json:"instance,omitempty"`
	RequestID string              `json:"request_id,omitempty"`
	Errors    []apperr.FieldError `json:"errors,omitempty"`
	Ext       map[string]any      `json:"-"`
}

// MarshalJSON flattens Ext into the top-level object, as RFC 9457 extension
// members are.
func (p Problem) MarshalJSON() ([]byte, error) {
	type plain Problem
	b, err := marshalUnescaped(plain(p))
	if err != nil || len(p.Ext) == 0 {
		return b, err
	}
	ext, err := marshalUnescaped(p.Ext)
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1], ','), ext[1:]...), nil
}

// marshalUnescaped is json.Marshal without its HTML escaping: problem
// details are read by people ("Authorization: Bearer <key>"), and a
// problem+json body is never inlined in HTML.
func marshalUnescaped(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

type problemKind struct {
	status int
	slug   string
}

// kinds maps each application error code to its HTTP status and problem
// type, in one table. Every problem's title is its status's reason phrase
// (http.StatusText: "Not Found", "Unprocessable Entity"), whoever writes
// it, so one status always has one title; the type and the detail say
// what happened.
var kinds = map[apperr.Code]problemKind{
	apperr.Invalid:          {http.StatusBadRequest, "invalid-request"},
	apperr.Unprocessable:    {http.StatusUnprocessableEntity, "validation-error"},
	apperr.NotFound:         {http.StatusNotFound, "not-found"},
	apperr.Conflict:         {http.StatusConflict, "conflict"},
	apperr.Unauthorized:     {http.StatusUnauthorized, "unauthorized"},
	apperr.Forbidden:        {http.StatusForbidden, "forbidden"},
	apperr.Unavailable:      {http.StatusServiceUnavailable, "unavailable"},
	apperr.Gone:             {http.StatusGone, "gone"},
	apperr.TooMany:          {http.StatusTooManyRequests, "too-many-requests"},
	apperr.UnsupportedMedia: {http.StatusUnsupportedMediaType, "unsupported-media-type"},
	apperr.Internal:         {http.StatusInternalServerError, "internal-error"},
}

// fieldErrors returns an error of code about one request field: the
// problem's detail is "field detail" and its errors name the field.
func fieldErrors(code apperr.Code, field, detail string) error {
	return &apperr.Error{Code: code, Message: field + " " + detail, Fields: []apperr.FieldError{{Field: field, Detail: detail}}}
}

// NewProblem builds a problem body for status with the given type slug;
// its title is http.StatusText(status) (see kinds), or title for a status
// that has none.
func NewProblem(status int, slug, title, detail string) Problem {
	if text := http.StatusText(status); text != "" {
		title = text
	}
	return Problem{Type: ProblemBase + slug, Title: title, Status: status, Detail: detail}
}

// WriteProblem writes p as application/problem+json, filling in the request id.
func WriteProblem(w http.ResponseWriter, r *http.Request, p Problem) {
	if p.RequestID == "" {
		p.RequestID = w.Header().Get(headerRequestID)
	}
	if p.Instance == "" && r != nil {
		p.Instance = r.URL.Path
	}
	// Not json.Marshal: it writes < > & as \u003c... (see marshalUnescaped).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		buf.Reset()
		buf.WriteString(`{"type":"` + ProblemBase + `internal-error","title":"Internal Server Error","status":500}` + "\n")
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Del("Content-Encoding")
	w.WriteHeader(p.Status)
	_, _ = w.Write(buf.Bytes())
}

// StatusClientClosedRequest is the status recorded (in the access log and
// sluice_http_requests_total) for a request whose client went away first.
const StatusClientClosedRequest = 499

// problemOf maps err to the problem the client sees, through the kinds
// table: an *apperr.Error shows its Message and Fields; anything else is
// an internal error whose cause the client does not see (the caller logs
// it). It is the one mapping of errors to problems, for whole answers
// (writeError) and for the items of a batch alike.
func problemOf(err error) Problem {
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return NewProblem(http.StatusRequestEntityTooLarge, "payload-too-large", "",
			"request body exceeds "+strconv.FormatInt(mbe.Limit, 10)+" bytes")
	}
	ae, ok := errors.AsType[*apperr.Error](err)
	if !ok {
		ae = &apperr.Error{Code: apperr.Internal}
	}
	kind, ok := kinds[ae.Code]
	if !ok {
		kind = kinds[apperr.Internal]
	}
	p := NewProblem(kind.status, kind.slug, "", ae.Message)
	p.Errors = ae.Fields
	if p.Status == http.StatusInternalServerError {
		p.Detail = "internal error; the server log has the details under this request id"
	}
	return p
}

// writeError maps err to a problem (problemOf). The client sees only an
// *apperr.Error's Message and Fields; anything else, and every 5xx cause,
// goes to the log.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client closed the connection before the answer: not a
		// server error (a load generator stopping cancels dozens of
		// requests at once). Recorded as 499, nginx's "client closed
		// request", which the client will never see.
		log.LogAttrs(r.Context(), slog.LevelDebug, "client went away",
			slog.String(logKeyRequestID, w.Header().Get(headerRequestID)), slog.String("route", r.Pattern))
		WriteProblem(w, r, NewProblem(StatusClientClosedRequest, "client-closed-request", "Client closed request", ""))
		return
	}
	if le, ok := errors.AsType[*authLimitedError](err); ok {
		writeAuthLimited(w, r, le)
		return
	}
	p := problemOf(err)
	if p.Status >= 500 {
		log.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String(logKeyRequestID, w.Header().Get(headerRequestID)),
			slog.String("route", r.Pattern), slog.Any("error", err))
		if p.Status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
	}
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
	}
	WriteProblem(w, r, p)
}
