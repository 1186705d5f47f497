package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/apperr"
)

// decodeJSON reads r's body into v. It refuses non-JSON content types,
// unknown fields, wrong types, trailing data and an empty body with an
// Invalid error naming the field; an oversize body yields the
// *http.MaxBytesError that writeError turns into 413.
func decodeJSON(r *http.Request, v any) error {
	buf, err := readBody(r)
	if err != nil {
		return err
	}
	defer putBody(buf)
	return decodeBody(buf.Bytes(), v)
}

// readBody checks r's Content-Type and reads its body into a pooled
// buffer, to be handed back with putBody once decoded: the hot routes
// (checks) would otherwise allocate and grow a fresh one per request.
func readBody(r *http.Request) (*bytes.Buffer, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" && !jsonCompatible(ct) {
		return nil, apperr.New(apperr.UnsupportedMedia, "Content-Type must be application/json, not %q", ct)
	}
	buf := bodies.Get().(*bytes.Buffer)
	if _, err := buf.ReadFrom(r.Body); err != nil {
		putBody(buf)
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, err
		}
		return nil, apperr.Wrap(apperr.Invalid, err, "reading the request body failed")
	}
	return buf, nil
}

var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBody bounds the buffers kept for reuse, so one large body does
// not stay in memory.
const maxPooledBody = 64 << 10

func putBody(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledBody {
		return
	}
	buf.Reset()
	bodies.Put(buf)
}

// jsonCompatible accepts JSON media types and the two that clients send by
// default with a JSON body (curl -d sends x-www-form-urlencoded).
func jsonCompatible(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "text/plain" || mt == "application/x-www-form-urlencoded"
}

// decodeBody is the pure part of decodeJSON, fuzzed on its own.
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return apperr.New(apperr.Invalid, "request body is empty; a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apperr.New(apperr.Invalid, "request body must hold a single JSON value")
	}
	return nil
}

func jsonError(err error) error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return apperr.New(apperr.Invalid, "malformed JSON at byte %d: %s", se.Offset, se.Error())
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := te.Field
		if field == "" {
			field = "(body)"
		}
		return &apperr.Error{Code: apperr.Invalid, Message: "a field has the wrong type",
			Fields: []apperr.FieldError{{Field: field, Detail: fmt.Sprintf("must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)}}}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return apperr.New(apperr.Invalid, "malformed JSON: the body ends too early")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return &apperr.Error{Code: apperr.Invalid, Message: "unknown field " + name,
			Fields: []apperr.FieldError{{Field: name, Detail: "unknown field"}}}
	}
	return apperr.Wrap(apperr.Invalid, err, "malformed JSON")
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	default:
		return "a " + goKind
	}
}

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding response failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// writeItems answers 200 with {"items": [...]}, each of list as out
// writes it.
func writeItems[T, J any](w http.ResponseWriter, list []T, out func(T) J) {
	items := make([]J, len(list))
	for i, x := range list {
		items[i] = out(x)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}
