package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Dashboard sessions. Signing in with an API key (POST /v1/session) sets a
// cookie that stands for that key until it expires, so the dashboard's
// JavaScript never holds the key. The cookie is stateless: it names the
// key, an expiry and a random nonce, signed with HMAC-SHA256 under the
// server secret shared by every node. Each request still looks the key up
// (through the auth cache), so revoking the key ends its sessions within
// authCacheTTL; signing out clears the cookie in the browser.
//
// Cookies ride along on cross-site requests, so unsafe methods authorized
// by a session must carry the session's CSRF token in X-CSRF-Token (an
// HMAC of the nonce, handed out with the session, never stored in a
// cookie) and pass net/http's CrossOriginProtection (Sec-Fetch-Site and
// Origin). The cookie is also HttpOnly and SameSite=Strict.
const (
	sessionCookie = "sluice_session"
	headerCSRF    = "X-CSRF-Token"
	sessionPrefix = "s1"
)

// signer makes and checks HMAC-SHA256 signatures under the server secret.
// Purposes ("session", "csrf", "prefs") are part of every signed message,
// so a signature made for one purpose is worthless for another.
type signer struct{ key []byte }

func newSigner(secret []byte) signer {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	return signer{key: secret}
}

func (s signer) sign(purpose string, parts ...string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(purpose))
	for _, p := range parts {
		m.Write([]byte{0})
		m.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s signer) verify(mac, purpose string, parts ...string) bool {
	return subtle.ConstantTimeCompare([]byte(mac), []byte(s.sign(purpose, parts...))) == 1
}

// session is a verified session cookie.
type session struct {
	keyID   string
	expires time.Time
	nonce   string
}

func (s signer) newSession(keyID string, expires time.Time) (string, session) {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	ss := session{keyID: keyID, expires: expires, nonce: base64.RawURLEncoding.EncodeToString(raw[:])}
	exp := strconv.FormatInt(expires.Unix(), 10)
	return strings.Join([]string{sessionPrefix, keyID, exp, ss.nonce, s.sign("session", keyID, exp, ss.nonce)}, "."), ss
}

// parseSession checks a cookie value's signature and expiry.
func (s signer) parseSession(v string, now time.Time) (session, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 || parts[0] != sessionPrefix {
		return session{}, false
	}
	keyID, exp, nonce, mac := parts[1], parts[2], parts[3], parts[4]
	if !s.verify(mac, "session", keyID, exp, nonce) {
		return session{}, false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !now.Before(time.Unix(unix, 0)) {
		return session{}, false
	}
	return session{keyID: keyID, expires: time.Unix(unix, 0), nonce: nonce}, true
}

func (s signer) csrfToken(ss session) string { return s.sign("csrf", ss.nonce) }

// sessionFrom returns r's verified session cookie, if any.
func (a *authenticator) sessionFrom(r *http.Request) (session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return session{}, false
	}
	return a.signer.parseSession(c.Value, a.now())
}

// safeMethod reports whether m cannot change state (RFC 9110 §9.2.1).
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// checkCSRF admits an unsafe request authorized by a session only with the
// session's token and from the same origin.
func (a *authenticator) checkCSRF(r *http.Request, ss session) bool {
	if safeMethod(r.Method) {
		return true
	}
	if a.crossOrigin.Check(r) != nil {
		return false
	}
	got := r.Header.Get(headerCSRF)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(a.signer.csrfToken(ss))) == 1
}

// sessionCookieFor builds the cookie carrying value; an empty value with
// maxAge -1 deletes it.
func sessionCookieFor(r *http.Request, value string, maxAge int, secure bool) *http.Cookie {
	return &http.Cookie{
		Name:     sessionCookie,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   secure || r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	}
}
