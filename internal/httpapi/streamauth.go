package httpapi

import (
	"context"
	"net/http"

	"github.com/sluicehq/sluice/internal/apperr"
)

// reauth checks again whether what admitted r (an API key, a dashboard
// session, an inbox token, or keyless mode) still admits it: nil if so,
// an Unauthorized or Forbidden error if not, another error if it cannot
// tell (the store is down).
type reauth func(r *http.Request) error

// reauthKey keys a request's reauth in its context.
type reauthKey struct{}

// withReauth returns r carrying check, for a long-lived answer to call as
// it runs (see stillAdmitted).
func withReauth(r *http.Request, check reauth) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), reauthKey{}, check))
}

// stillAdmitted reports whether r is still authorised, as its reauth (if
// any) says: a long-lived stream asks on every heartbeat, and ends when
// the token that opened it has expired or been revoked, or the key (or
// the session's key) has been revoked. A check that cannot tell (the
// store is unavailable) keeps the stream: the key cache serves what it
// knew, as for every other request.
func stillAdmitted(r *http.Request) bool {
	check, ok := r.Context().Value(reauthKey{}).(reauth)
	if !ok {
		return true
	}
	err := check(r)
	return !apperr.Is(err, apperr.Unauthorized) && !apperr.Is(err, apperr.Forbidden)
}
