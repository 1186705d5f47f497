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
	Subscribe(user string) (*inbox.Subscription, error)
}

var _ Inbox = (*inbox.Service)(nil)

const (
	// inboxTokenPrefix tells an inbox token from an API key in a bearer
	// header.
	inboxTokenPrefix  = "ibx1."
	defaultInboxTTL   = 24 * time.Hour
	maxInboxTTL       = 366 * 24 * time.Hour
	defaultInboxLimit = 50
	maxInboxLimit     = 200
)

// Inbox tokens: "ibx1." base64url(user id) "." expiry (Unix seconds) "."
// HMAC under the server secret, purpose "inbox": the preference links'
// signing, for another purpose, so neither token opens the other's page.
func (s signer) inboxToken(user string, expires time.Time) string {
	u := base64.RawURLEncoding.EncodeToString([]byte(user))
	exp := strconv.FormatInt(expires.Unix(), 10)
	return inboxTokenPrefix + u + "." + exp + "." + s.sign("inbox", user, exp)
}

func (s signer) parseInboxToken(tok string, now time.Time) (user string, ok bool) {
	rest, found := strings.CutPrefix(tok, inboxTokenPrefix)
	parts := strings.Split(rest, ".")
	if !found || len(parts) != 3 {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(raw) == 0 || !s.verify(parts[2], "inbox", string(raw), parts[1]) {
		return "", false
	}
	unix, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !now.Before(time.Unix(unix, 0)) {
		return "", false
	}
	return string(raw), true
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
		err := s.inboxAuth(r, user, scope)
		if err == nil && s.opts.Inbox == nil {
			err = apperr.New(apperr.Unavailable, "the in-app inbox is not configured on this server")
		}
		if err == nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
			err = h(s.opts.Inbox, user, w, r)
		}
		if err != nil {
			writeError(w, r, s.log, err)
		}
	})
}

func (s *Server) inboxAuth(r *http.Request, user string, scope auth.Scope) error {
	tok := r.URL.Query().Get("token")
	if b, ok := bearer(r); ok && tok == "" && strings.HasPrefix(b, inboxTokenPrefix) {
		tok = b
	}
	if tok == "" {
		_, err := s.auth.authorize(r, scope)
		return err
	}
	owner, ok := s.auth.signer.parseInboxToken(tok, s.opts.Now())
	switch {
	case !ok:
		return apperr.New(apperr.Unauthorized, "this inbox token is invalid or has expired; ask for a new one")
	case owner != user:
		return apperr.New(apperr.Forbidden, "this inbox token is for another user's inbox")
	}
	return nil
}

// inboxTokenHandler mints a user's inbox token; ttl in the body (optional)
// overrides the default day, up to a year.
func (s *Server) inboxTokenHandler(w http.ResponseWriter, r *http.Request) error {
	return s.signedPageLink(w, r, defaultInboxTTL, maxInboxTTL, "24h", "inbox", s.auth.signer.inboxToken)
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
