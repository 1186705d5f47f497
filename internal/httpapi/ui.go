package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
)

// UIOptions configures the dashboard at /ui/, its sign-in sessions and the
// end-user preference links. The zero value serves no dashboard files and
// signs with a random per-process key (sessions and links then die with
// the process and differ between nodes).
type UIOptions struct {
	// Assets are the dashboard's files (package web); nil answers 404.
	Assets fs.FS
	// Secret signs session cookies and preference links; every node
	// sharing a database should use the same one.
	Secret []byte
	// SessionTTL is how long a sign-in lasts; default 12h.
	SessionTTL time.Duration
	// SecureCookies marks cookies Secure on plain HTTP too (behind a
	// TLS-terminating proxy); on TLS connections they always are.
	SecureCookies bool
	// PublicURL is the root of preference links, e.g.
	// https://notify.example.com; default http://<request host>.
	PublicURL string
	// PreferenceTTL is the default lifetime of a preference link;
	// default 30 days.
	PreferenceTTL time.Duration
}

// securityHeaders go on every dashboard file: scripts and styles only from
// this server (no inline code, no CDN), no framing, no referrer (the
// preference page's token lives in the URL fragment and never leaves the
// browser anyway).
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
}

func (s *Server) registerUI() {
	if s.opts.UI.SessionTTL <= 0 {
		s.opts.UI.SessionTTL = 12 * time.Hour
	}
	if s.opts.UI.PreferenceTTL <= 0 {
		s.opts.UI.PreferenceTTL = 30 * 24 * time.Hour
	}
	s.Handle("GET /ui", public, func(w http.ResponseWriter, r *http.Request) error {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		return nil
	})
	s.Handle("GET /{$}", public, s.root) // root.go
	s.Handle("GET /ui/{path...}", public, s.uiAsset)
	s.Handle("POST /v1/session", public, s.signIn)
	s.Handle("GET /v1/session", public, s.currentSession)
	s.Handle("DELETE /v1/session", public, s.signOut)
}

// inboxElement is the module defining <sluice-inbox>, the inbox as a custom
// element for an application's own pages: the one dashboard file other
// origins' pages may load.
const inboxElement = "inbox.js"

// assetETags caches each file's ETag (a hash of its bytes).
var assetETags sync.Map // path -> string

// uiAsset serves a dashboard file: / is index.html, a path without an
// extension names an .html page.
func (s *Server) uiAsset(w http.ResponseWriter, r *http.Request) error {
	if s.opts.UI.Assets == nil {
		return apperr.New(apperr.NotFound, "this server has no dashboard built in")
	}
	name := strings.TrimPrefix(path.Clean("/"+r.PathValue("path")), "/")
	switch {
	case name == "":
		name = "index.html"
	case path.Ext(name) == "":
		name += ".html"
	}
	body, err := fs.ReadFile(s.opts.UI.Assets, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return apperr.New(apperr.NotFound, "no dashboard file %q", name)
		}
		return err
	}
	h := w.Header()
	for k, v := range securityHeaders {
		h.Set(k, v)
	}
	if name == inboxPage {
		embeddable(h)
	}
	if name == inboxElement {
		// Any page may load the element: a module script is fetched in
		// CORS mode, and this one is public code holding no data. Whether
		// the page's origin may then call the API is http.cors_origins'
		// call (cors.go).
		h.Set("Access-Control-Allow-Origin", "*")
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	h.Set("Content-Type", ctype)
	// Files change only with the binary: revalidate each time, cheaply.
	tag, ok := assetETags.Load(name)
	if !ok {
		sum := sha256.Sum256(body)
		tag, _ = assetETags.LoadOrStore(name, `"`+hex.EncodeToString(sum[:8])+`"`)
	}
	h.Set("ETag", tag.(string))
	h.Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == tag.(string) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, err = w.Write(body)
	}
	return err
}

// sessionJSON describes the caller's dashboard session.
type sessionJSON struct {
	SignedIn  bool       `json:"signed_in"`
	KeyID     string     `json:"key_id,omitempty"`
	Name      string     `json:"name,omitempty"`
	Scopes    []string   `json:"scopes"`
	Keyless   bool       `json:"keyless"`
	Closed    bool       `json:"closed,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	CSRFToken string     `json:"csrf_token,omitempty"`
}

func (s *Server) sessionResponse(k auth.Key, ss session) sessionJSON {
	out := sessionJSON{SignedIn: true, KeyID: k.ID, Name: k.Name, Scopes: make([]string, len(k.Scopes)), CSRFToken: s.auth.signer.csrfToken(ss)}
	for i, sc := range k.Scopes {
		out.Scopes[i] = string(sc)
	}
	exp := ss.expires.UTC()
	out.ExpiresAt = &exp
	return out
}

// keyless answers for a loopback client naming a loopback or allowed host
// while no key is configured: it is trusted like an admin and needs no
// sign-in.
func (s *Server) keyless(r *http.Request) (bool, error) {
	configured, err := s.auth.keysConfigured(r.Context())
	if err != nil {
		return false, apperr.Wrap(apperr.Unavailable, err, "checking API keys failed")
	}
	return !configured && s.localClient(r) && s.auth.hostAllowed(r), nil
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request) error {
	if s.auth.crossOrigin.Check(r) != nil {
		return errCrossOrigin
	}
	var body struct {
		Key string `json:"key"`
	}
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	secret := strings.TrimSpace(body.Key)
	if secret == "" {
		return fieldErrors(apperr.Unprocessable, "key", "is required: paste an API key made by `sluice keys create`")
	}
	key, err := s.auth.checkSecret(r, secret)
	if err != nil {
		return err
	}
	value, ss := s.auth.signer.newSession(key.ID, s.opts.Now().Add(s.opts.UI.SessionTTL))
	http.SetCookie(w, sessionCookieFor(r, value, int(s.opts.UI.SessionTTL/time.Second), s.opts.UI.SecureCookies))
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, s.sessionResponse(key, ss))
	return nil
}

func (s *Server) currentSession(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	if ok, err := s.keyless(r); err != nil {
		return err
	} else if ok {
		writeJSON(w, http.StatusOK, sessionJSON{SignedIn: true, Scopes: []string{string(auth.ScopeAdmin)}, Keyless: true})
		return nil
	}
	// Not signed in is an answer, not an error: the page shows its sign-in
	// form.
	signedOut := sessionJSON{Scopes: []string{}}
	// Closed: every key has been revoked, so signing in cannot work until
	// one is created on the node (the page says so).
	if n, err := s.opts.Keys.CountActiveAPIKeys(r.Context()); err == nil && n == 0 {
		signedOut.Closed = true
	}
	ss, ok := s.auth.sessionFrom(r)
	if !ok {
		writeJSON(w, http.StatusOK, signedOut)
		return nil
	}
	key, found, err := s.auth.lookupID(r.Context(), ss.keyID)
	if err != nil {
		return apperr.Wrap(apperr.Unavailable, err, "checking the session's API key failed")
	}
	if !found || !key.Active() {
		http.SetCookie(w, sessionCookieFor(r, "", -1, s.opts.UI.SecureCookies))
		writeJSON(w, http.StatusOK, signedOut)
		return nil
	}
	writeJSON(w, http.StatusOK, s.sessionResponse(key, ss))
	return nil
}

// signOut clears the cookie. Sessions are stateless: a copy of the cookie
// taken before stays valid until it expires or its key is revoked.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) error {
	if s.auth.crossOrigin.Check(r) != nil {
		return errCrossOrigin
	}
	http.SetCookie(w, sessionCookieFor(r, "", -1, s.opts.UI.SecureCookies))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
