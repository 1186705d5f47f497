package httpapi

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/inbox"
)

// Inbox is the in-app inbox as the API uses it; *inbox.Service implements
// it.
type Inbox interface {
	List(ctx context.Context, user string, before int64, limit int, archived bool) (inbox.Page, error)
	Mark(ctx context.Context, user, id string, a inbox.Action) (inbox.Message, int, error)
	ReadAll(ctx context.Context, user string) (changed, unread int, err error)
	Since(ctx context.Context, user string, after int64, limit int) ([]inbox.Message, error)
	Unread(ctx context.Context, user string) (int, error)
	Subscribe(user, key string) (*inbox.Subscription, error)
	TokenGeneration(ctx context.Context, user string, presented int64) (int64, error)
	MintGeneration(ctx context.Context, user string) (int64, error)
	RevokeTokens(ctx context.Context, user string) (int64, error)
}

var _ Inbox = (*inbox.Service)(nil)

func errNoInbox() error {
	return apperr.New(apperr.Unavailable, "the in-app inbox is not configured on this server")
}

const (
	// inboxTokenPrefix tells an inbox token from an API key in a bearer
	// header; legacyInboxTokenPrefix is that of the first form, refused.
	inboxTokenPrefix       = "ibx2."
	legacyInboxTokenPrefix = "ibx1."
	defaultInboxTTL        = 24 * time.Hour
	maxInboxTTL            = 366 * 24 * time.Hour
	defaultInboxLimit      = 50
	maxInboxLimit          = 200
)

// Inbox tokens: "ibx2." base64url(user id) "." expiry (Unix seconds) "."
// generation "." HMAC under the server secret, purpose "inbox": the
// preference links' signing, for another purpose, so neither token opens
// the other's page. The generation is the user's token generation when
// the token was minted (internal/inbox/tokens.go). The HMAC covers the
// form's version and its every field, always the same number of them
// (inboxTokenFields), so no token of one shape or version verifies as
// another: the first form ("ibx1.", with the generation left out at 0)
// signed a varying number of fields, and is refused.
func (s signer) inboxToken(user string, expires time.Time, gen int64) string {
	u := base64.RawURLEncoding.EncodeToString([]byte(user))
	exp := strconv.FormatInt(expires.Unix(), 10)
	g := strconv.FormatInt(gen, 10)
	return inboxTokenPrefix + u + "." + exp + "." + g + "." + s.sign("inbox", inboxTokenVersion, user, exp, g)
}

// inboxTokenVersion is signed first in every inbox token's HMAC; the
// form has inboxTokenFields dot-separated parts after its prefix.
const (
	inboxTokenVersion = "v2"
	inboxTokenFields  = 4
)

func (s signer) parseInboxToken(tok string, now time.Time) (user string, gen int64, ok bool) {
	rest, found := strings.CutPrefix(tok, inboxTokenPrefix)
	parts := strings.Split(rest, ".")
	if !found || len(parts) != inboxTokenFields {
		return "", 0, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(raw) == 0 {
		return "", 0, false
	}
	if !s.verify(parts[3], "inbox", inboxTokenVersion, string(raw), parts[1], parts[2]) {
		return "", 0, false
	}
	unix, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !now.Before(time.Unix(unix, 0)) {
		return "", 0, false
	}
	if gen, err = strconv.ParseInt(parts[2], 10, 64); err != nil || gen < 0 {
		return "", 0, false
	}
	return string(raw), gen, true
}

// inboxPage is the end user's inbox page under /ui/, the one dashboard
// file other sites may frame: it holds nothing without the token in its
// URL fragment, which only the embedding application knows.
const inboxPage = "inbox.html"

// embeddable lets any site frame the page h answers with.
func embeddable(h http.Header) {
	h.Set("Content-Security-Policy", strings.Replace(h.Get("Content-Security-Policy"), "frame-ancestors 'none'", "frame-ancestors *", 1))
	h.Del("X-Frame-Options")
}

func (s *Server) registerInbox() {
	s.Handle("POST /v1/users/{id}/inbox-token", auth.ScopeNotifySend, s.inboxTokenHandler)
	s.Handle("DELETE /v1/users/{id}/inbox-tokens", auth.ScopeNotifySend, s.revokeInboxTokens)
	s.handleInbox("GET /v1/users/{id}/inbox", auth.ScopeNotifyRead, listInbox)
	s.handleInbox("GET /v1/users/{id}/inbox/stream", auth.ScopeNotifyRead, s.inboxStream)
	s.handleInbox("POST /v1/users/{id}/inbox/read-all", auth.ScopeNotifySend, readAllInbox)
	for _, a := range []inbox.Action{inbox.Read, inbox.Unread, inbox.Archive} {
		s.handleInbox("POST /v1/users/{id}/inbox/{message_id}/"+string(a), auth.ScopeNotifySend,
			func(svc Inbox, user string, w http.ResponseWriter, r *http.Request) error {
				m, unread, err := svc.Mark(r.Context(), user, r.PathValue("message_id"), a)
				if err != nil {
					return err
				}
				writeJSON(w, http.StatusOK, map[string]any{"message": toInboxJSON(m), "unread": unread})
				return nil
			})
	}
}

// inboxHandler serves one inbox route for user (the path's {id}).
type inboxHandler func(svc Inbox, user string, w http.ResponseWriter, r *http.Request) error

// handleInbox registers an inbox route. Like Handle it requires scope of
// an API key or session, but a user's inbox token (in ?token= or a bearer
// header) admits that user's own inbox too: the end user's browser holds
// a token, never a key.
func (s *Server) handleInbox(pattern string, scope auth.Scope, h inboxHandler) {
	s.routes = append(s.routes, route{pattern: pattern, scope: scope})
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		user := r.PathValue("id")
		use, err := s.inboxAuth(r, user, scope)
		if err == nil && !use.used {
			// Admitted by a key or a session: the handler knows whose.
			r = r.WithContext(context.WithValue(r.Context(), callerKey{}, use.key))
		}
		if err == nil && s.opts.Inbox == nil {
			err = errNoInbox()
		}
		if err == nil {
			// A long-lived answer (the stream) asks again, as it runs,
			// whether what admitted it still does.
			r = withReauth(r, func(r *http.Request) error {
				_, err := s.inboxAuth(r, user, scope)
				return err
			})
			r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
			err = h(s.opts.Inbox, user, w, r)
		}
		if err != nil {
			writeError(w, r, s.log, err)
		}
	})
}

// inboxTokenUse is how a request was admitted to an inbox: by an inbox
// token (used) of generation gen, or by an API key or session (key; the
// zero Key in keyless mode).
type inboxTokenUse struct {
	used bool
	gen  int64
	key  auth.Key
}

func (s *Server) inboxAuth(r *http.Request, user string, scope auth.Scope) (inboxTokenUse, error) {
	tok := r.URL.Query().Get("token")
	if b, ok := bearer(r); ok && tok == "" && (strings.HasPrefix(b, inboxTokenPrefix) || strings.HasPrefix(b, legacyInboxTokenPrefix)) {
		tok = b
	}
	if tok == "" {
		key, err := s.auth.authorize(r, scope)
		return inboxTokenUse{key: key}, err
	}
	owner, gen, ok := s.auth.signer.parseInboxToken(tok, s.opts.Now())
	switch {
	case !ok && strings.HasPrefix(tok, legacyInboxTokenPrefix):
		return inboxTokenUse{}, apperr.New(apperr.Unauthorized, "this inbox token is of a form no longer accepted; ask for a new one")
	case !ok:
		return inboxTokenUse{}, apperr.New(apperr.Unauthorized, "this inbox token is invalid or has expired; ask for a new one")
	case owner != user:
		return inboxTokenUse{}, apperr.New(apperr.Forbidden, "this inbox token is for another user's inbox")
	}
	use := inboxTokenUse{used: true, gen: gen}
	return use, s.inboxTokenCurrent(r.Context(), user, use)
}

// inboxTokenCurrent checks that a token of use.gen has not been revoked.
func (s *Server) inboxTokenCurrent(ctx context.Context, user string, use inboxTokenUse) error {
	if s.opts.Inbox == nil {
		return errNoInbox()
	}
	cur, err := s.opts.Inbox.TokenGeneration(ctx, user, use.gen)
	switch {
	case err != nil:
		return err
	case cur != use.gen:
		return apperr.New(apperr.Unauthorized, "this inbox token has been revoked; ask for a new one")
	}
	return nil
}

// inboxTokenHandler mints a user's inbox token; ttl in the body (optional)
// overrides the default day, up to a year. The token carries the user's
// current token generation, read from the store.
func (s *Server) inboxTokenHandler(w http.ResponseWriter, r *http.Request) error {
	var gen int64
	if s.opts.Inbox != nil {
		var err error
		if gen, err = s.opts.Inbox.MintGeneration(r.Context(), r.PathValue("id")); err != nil {
			return err
		}
	}
	return s.signedPageLink(w, r, defaultInboxTTL, maxInboxTTL, "24h", "inbox", func(user string, expires time.Time) string {
		return s.auth.signer.inboxToken(user, expires, gen)
	})
}

// revokeInboxTokens revokes every inbox token of the user minted so far:
// this node refuses them at once, every node within
// inbox.DefaultTokenCacheTTL. Open streams end at their next heartbeat.
func (s *Server) revokeInboxTokens(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Inbox == nil {
		return errNoInbox()
	}
	if _, err := s.opts.Inbox.RevokeTokens(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// inboxJSON is a message as the API shows it.
type inboxJSON struct {
	inbox.Message
	Read bool `json:"read"`
}

func toInboxJSON(m inbox.Message) inboxJSON {
	return inboxJSON{Message: m, Read: !m.ReadAt.IsZero()}
}

func listInbox(svc Inbox, user string, w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit := defaultInboxLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxInboxLimit {
			return fieldErrors(apperr.Invalid, "limit", "must be an integer from 1 to "+strconv.Itoa(maxInboxLimit))
		}
		limit = n
	}
	var before int64
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return fieldErrors(apperr.Invalid, "cursor", "must be the next_cursor of a previous page")
		}
		before = n
	}
	archived := false
	switch q.Get("archived") {
	case "", "false":
	case "true":
		archived = true
	default:
		return fieldErrors(apperr.Invalid, "archived", "must be true or false")
	}
	p, err := svc.List(r.Context(), user, before, limit, archived)
	if err != nil {
		return err
	}
	items := make([]inboxJSON, len(p.Items))
	for i, m := range p.Items {
		items[i] = toInboxJSON(m)
	}
	next := ""
	if p.Next != 0 {
		next = strconv.FormatInt(p.Next, 10)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "unread": p.Unread, "next_cursor": next})
	return nil
}

func readAllInbox(svc Inbox, user string, w http.ResponseWriter, r *http.Request) error {
	changed, unread, err := svc.ReadAll(r.Context(), user)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"changed": changed, "unread": unread})
	return nil
}
