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
	"github.com/sluicehq/sluice/internal/notify"
)

// PreferenceSwitches are what a person controls on the preference page:
// categories and channels on or off, as JSON. Everything else in their
// settings (contacts, locale, quiet hours) stays as the application set it.
// It converts to and from [notify.Switches].
type PreferenceSwitches struct {
	Channels   map[notify.Channel]bool  `json:"channels"`
	Categories map[notify.Category]bool `json:"categories"`
}

// Preferences reads and changes one user's switches. SetSwitches enforces
// the notification rules (critical stays on, a channel stays on) with an
// Unprocessable error naming the field. The notification service
// implements it.
type Preferences interface {
	Switches(ctx context.Context, user string) (notify.Switches, error)
	SetSwitches(ctx context.Context, user string, sw notify.Switches) (notify.Switches, error)
}

var _ Preferences = (*notify.Service)(nil)

const (
	headerPreferenceToken = "X-Preference-Token"
	maxPreferenceTTL      = 366 * 24 * time.Hour
)

// Preference tokens: base64url(user id) "." expiry (Unix seconds) "." HMAC
// under the server secret, purpose "prefs". They travel in the link's URL
// fragment, which browsers never send, so they stay out of logs.
func (s signer) preferenceToken(user string, expires time.Time) string {
	u := base64.RawURLEncoding.EncodeToString([]byte(user))
	exp := strconv.FormatInt(expires.Unix(), 10)
	return u + "." + exp + "." + s.sign("prefs", user, exp)
}

func (s signer) parsePreferenceToken(tok string, now time.Time) (user string, expires time.Time, ok bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "", time.Time{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(raw) == 0 {
		return "", time.Time{}, false
	}
	if !s.verify(parts[2], "prefs", string(raw), parts[1]) {
		return "", time.Time{}, false
	}
	unix, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !now.Before(time.Unix(unix, 0)) {
		return "", time.Time{}, false
	}
	return string(raw), time.Unix(unix, 0), true
}

func (s *Server) registerPreferences() {
	s.Handle("POST /v1/users/{id}/preference-link", auth.ScopeNotifySend, s.preferenceLink)
	s.Handle("GET /v1/preferences", public, s.getPreferences)
	s.Handle("PUT /v1/preferences", public, s.putPreferences)
}

// preferenceLink mints a signed link to user's preference page; ttl in the
// body (optional) overrides the configured lifetime, up to a year.
func (s *Server) preferenceLink(w http.ResponseWriter, r *http.Request) error {
	return s.signedPageLink(w, r, s.opts.UI.PreferenceTTL, maxPreferenceTTL, "720h", "preferences", s.auth.signer.preferenceToken)
}

// signedPageLink answers a request for a signed link to user's page of the
// UI (/ui/<page>#t=<token>): the token minted by sign, valid for the
// body's ttl (optional: def; from 1m to maxTTL, example in the error).
func (s *Server) signedPageLink(w http.ResponseWriter, r *http.Request, def, maxTTL time.Duration, example, page string,
	sign func(user string, expires time.Time) string) error {
	var body struct {
		TTL string `json:"ttl"`
	}
	if r.ContentLength != 0 {
		if err := decodeJSON(r, &body); err != nil {
			return err
		}
	}
	ttl := def
	if body.TTL != "" {
		d, err := time.ParseDuration(body.TTL)
		if err != nil || d < time.Minute || d > maxTTL {
			return fieldErrors(apperr.Unprocessable, "ttl", "must be a duration from 1m to 8784h, e.g. "+example)
		}
		ttl = d
	}
	user := r.PathValue("id")
	expires := s.opts.Now().Add(ttl).Truncate(time.Second)
	tok := sign(user, expires)
	base, err := s.pageBase(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"user_id": user, "url": base + "/ui/" + page + "#t=" + tok,
		"token": tok, "expires_at": expires.UTC(),
	})
	return nil
}

type preferencesJSON struct {
	UserID string `json:"user_id"`
	PreferenceSwitches
	Locked    []string  `json:"locked"`
	ExpiresAt time.Time `json:"expires_at"`
}

// preferenceUser checks the request's token.
func (s *Server) preferenceUser(r *http.Request) (string, time.Time, Preferences, error) {
	if s.opts.Preferences == nil {
		return "", time.Time{}, nil, apperr.New(apperr.Unavailable, "notifications are not configured on this server")
	}
	user, exp, ok := s.auth.signer.parsePreferenceToken(r.Header.Get(headerPreferenceToken), s.opts.Now())
	if !ok {
		return "", time.Time{}, nil, apperr.New(apperr.Unauthorized, "this preference link is invalid or has expired; ask for a new one")
	}
	return user, exp, s.opts.Preferences, nil
}

func (s *Server) getPreferences(w http.ResponseWriter, r *http.Request) error {
	user, exp, p, err := s.preferenceUser(r)
	if err != nil {
		return err
	}
	sw, err := p.Switches(r.Context(), user)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, preferencesJSON{UserID: user, PreferenceSwitches: PreferenceSwitches(sw), Locked: []string{"categories.critical"}, ExpiresAt: exp.UTC()})
	return nil
}

func (s *Server) putPreferences(w http.ResponseWriter, r *http.Request) error {
	user, exp, p, err := s.preferenceUser(r)
	if err != nil {
		return err
	}
	var body PreferenceSwitches
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	sw, err := p.SetSwitches(r.Context(), user, notify.Switches(body))
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, preferencesJSON{UserID: user, PreferenceSwitches: PreferenceSwitches(sw), Locked: []string{"categories.critical"}, ExpiresAt: exp.UTC()})
	return nil
}
