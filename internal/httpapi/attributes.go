package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/workflow"
)

// UserAttributes keeps each user's attributes, the JSON object workflow
// branches read as user.<name> (*store.DB implements it).
type UserAttributes interface {
	PutUserAttributes(ctx context.Context, user string, attrs json.RawMessage, now time.Time) error
	// UserAttributes answers {} for a user without any.
	UserAttributes(ctx context.Context, user string) (json.RawMessage, error)
}

// MaxAttributeBytes bounds one user's attributes, as stored (compacted).
const MaxAttributeBytes = 16 << 10

// putAttributes replaces a user's attributes with the body, a JSON
// object, and answers them as stored; {} deletes them. A user new to
// the attributes past the node's bound is 429 (svc says so).
func (s *Server) putAttributes(svc UserAttributes, w http.ResponseWriter, r *http.Request) error {
	user := r.PathValue("id")
	if err := checkAttributeUser(user); err != nil {
		return err
	}
	var attrs map[string]json.RawMessage
	if err := decodeJSON(r, &attrs); err != nil {
		return err
	}
	if attrs == nil { // the body was null
		return fieldErrors(apperr.Invalid, "(body)", "must be a JSON object")
	}
	compact, err := json.Marshal(attrs) // compacted, keys sorted
	if err != nil {
		return apperr.Wrap(apperr.Invalid, err, "malformed JSON")
	}
	switch {
	case len(compact) > MaxAttributeBytes:
		return fieldErrors(apperr.Unprocessable, "(body)", "must be at most "+strconv.Itoa(MaxAttributeBytes)+" bytes of JSON")
	case !utf8.Valid(compact):
		return fieldErrors(apperr.Unprocessable, "(body)", "must be valid UTF-8")
	case workflow.DataDepth(compact) > workflow.MaxDataDepth:
		return fieldErrors(apperr.Unprocessable, "(body)", "must nest objects and arrays at most "+strconv.Itoa(workflow.MaxDataDepth)+" deep")
	}
	if err := svc.PutUserAttributes(r.Context(), user, compact, s.opts.Now()); err != nil {
		return err
	}
	writeRawJSON(w, compact)
	return nil
}

func getAttributes(svc UserAttributes, w http.ResponseWriter, r *http.Request) error {
	user := r.PathValue("id")
	if err := checkAttributeUser(user); err != nil {
		return err
	}
	raw, err := svc.UserAttributes(r.Context(), user)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = []byte("{}")
	}
	writeRawJSON(w, raw)
	return nil
}

// checkAttributeUser refuses a user id notifications would refuse.
func checkAttributeUser(user string) error {
	if user == "" || len(user) > notify.MaxUserIDBytes || !utf8.ValidString(user) {
		return fieldErrors(apperr.Invalid, "id", "must be a user id of at most "+strconv.Itoa(notify.MaxUserIDBytes)+" bytes")
	}
	for _, c := range user {
		if c < 0x20 || c == 0x7f {
			return fieldErrors(apperr.Invalid, "id", "must hold printable characters only")
		}
	}
	return nil
}

// writeRawJSON answers 200 with body, JSON already.
func writeRawJSON(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(bytes.Clone(body), '\n'))
}
