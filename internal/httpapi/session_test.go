package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
)

// browserCall is a request as the dashboard sends it: the session cookie,
// optionally the CSRF token and a Sec-Fetch-Site header.
func (b *bundle) browserCall(method, path, body string, cookie *http.Cookie, csrf, site string) *http.Response {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr = "192.0.2.7:4444"
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	if csrf != "" {
		req.Header.Set(headerCSRF, csrf)
	}
	if site != "" {
		req.Header.Set("Sec-Fetch-Site", site)
	}
	return serve(b.t, b.srv, req)
}

func signIn(t *testing.T, b *bundle, secret string) (*http.Cookie, sessionJSON) {
	t.Helper()
	resp := b.browserCall("POST", "/v1/session", `{"key":"`+secret+`"}`, nil, "", "same-origin")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("sign in = %d %v", resp.StatusCode, decodeProblem(t, resp))
	}
	var s sessionJSON
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.MaxAge <= 0 {
		t.Fatalf("session cookie = %+v; want HttpOnly, SameSite=Strict, Path=/, an expiry", cookie)
	}
	if strings.Contains(cookie.Value, secret) {
		t.Fatal("the cookie carries the API key")
	}
	return cookie, s
}

func TestSessionStandsForItsKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.addKey(t, auth.ScopeAdmin)
	reader := b.addKey(t, auth.ScopeNotifyRead)

	if resp := b.browserCall("POST", "/v1/session", `{"key":"sk_nope"}`, nil, "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("sign in with a wrong key = %d, want 401", resp.StatusCode)
	}
	cookie, s := signIn(t, b, admin)
	if !s.SignedIn || s.CSRFToken == "" || len(s.Scopes) != 1 || s.Scopes[0] != "admin" {
		t.Errorf("session = %+v", s)
	}
	tests := []struct {
		name         string
		method, path string
		body         string
		cookie       *http.Cookie
		csrf, site   string
		want         int
	}{
		{name: "read with the session", method: "GET", path: "/v1/keys", cookie: cookie, want: 200},
		{name: "read without a session", method: "GET", path: "/v1/keys", want: 401},
		{name: "tampered cookie", method: "GET", path: "/v1/keys", cookie: &http.Cookie{Name: sessionCookie, Value: cookie.Value[:len(cookie.Value)-2] + "xx"}, want: 401},
		{name: "write with the token", method: "POST", path: "/v1/ratelimit/blocks", body: `{"key":"k","duration":"1m","reason":"r"}`, cookie: cookie, csrf: s.CSRFToken, site: "same-origin", want: 503},
		{name: "write without the token", method: "POST", path: "/v1/ratelimit/blocks", body: `{"key":"k","duration":"1m"}`, cookie: cookie, want: 403},
		{name: "write with a wrong token", method: "DELETE", path: "/v1/keys/key_x", cookie: cookie, csrf: "bad", want: 403},
		{name: "write from another site", method: "DELETE", path: "/v1/keys/key_x", cookie: cookie, csrf: s.CSRFToken, site: "cross-site", want: 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := b.browserCall(tt.method, tt.path, tt.body, tt.cookie, tt.csrf, tt.site)
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
			}
		})
	}

	// A session has its key's scopes, no more.
	rc, _ := signIn(t, b, reader)
	if resp := b.browserCall("GET", "/v1/keys", "", rc, "", ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("notify:read session listing keys = %d, want 403", resp.StatusCode)
	}

	// Revoking the key ends its sessions.
	var keys struct {
		Items []keyResponse `json:"items"`
	}
	resp := b.do(call{method: "GET", path: "/v1/keys", key: admin})
	_ = json.NewDecoder(resp.Body).Decode(&keys)
	for _, k := range keys.Items {
		if k.Scopes[0] == "notify:read" {
			b.do(call{method: "DELETE", path: "/v1/keys/" + k.ID, key: admin})
		}
	}
	if resp := b.browserCall("GET", "/v1/dead-letters", "", rc, "", ""); resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusNotFound {
		t.Errorf("revoked key's session = %d, want 401", resp.StatusCode)
	}
	var cur sessionJSON
	_ = json.NewDecoder(b.browserCall("GET", "/v1/session", "", rc, "", "").Body).Decode(&cur)
	if cur.SignedIn {
		t.Error("GET /v1/session with a revoked key's cookie says signed in")
	}
}

func TestSessionExpires(t *testing.T) {
	t.Parallel()
	s := newSigner([]byte("0123456789abcdef0123456789abcdef"))
	now := time.Unix(1_800_000_000, 0)
	v, _ := s.newSession("key_1", now.Add(time.Hour))
	if _, ok := s.parseSession(v, now.Add(59*time.Minute)); !ok {
		t.Error("session refused before its expiry")
	}
	if _, ok := s.parseSession(v, now.Add(time.Hour)); ok {
		t.Error("session accepted at its expiry")
	}
	other := newSigner([]byte("another secret, another server.."))
	if _, ok := other.parseSession(v, now); ok {
		t.Error("session accepted under another secret")
	}
	if strings.Count(v, ".") != 4 {
		t.Errorf("session value %q has an unexpected shape", v)
	}
}

func TestSignOutAndKeyless(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var s sessionJSON
	_ = json.NewDecoder(b.do(call{method: "GET", path: "/v1/session"}).Body).Decode(&s)
	if !s.SignedIn || !s.Keyless {
		t.Errorf("loopback session without keys = %+v, want keyless", s)
	}
	// A keyless loopback server refuses cross-site browser writes.
	req := httptest.NewRequest("POST", "/v1/keys", strings.NewReader(`{"name":"x","scopes":["admin"]}`))
	req.RemoteAddr = "127.0.0.1:1"
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	rec := record(t, b.srv, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("cross-site keyless POST /v1/keys = %d, want 403", rec.Code)
	}
	resp := b.browserCall("DELETE", "/v1/session", "", nil, "", "same-origin")
	if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Errorf("sign out = %d %v, want 204 clearing the cookie", resp.StatusCode, resp.Cookies())
	}
}

func TestUIAssets(t *testing.T) {
	t.Parallel()
	files := fstest.MapFS{
		"index.html":       {Data: []byte("<!doctype html><p>dash</p>")},
		"preferences.html": {Data: []byte("<!doctype html><p>prefs</p>")},
		"app.js":           {Data: []byte("export {};")},
	}
	srv := New(Options{Logger: setup(t).srv.log, UI: UIOptions{Assets: files}})
	tests := []struct {
		path, want, ctype string
		status            int
	}{
		{"/ui/", "dash", "text/html", 200},
		{"/ui/preferences", "prefs", "text/html", 200},
		{"/ui/app.js", "export", "javascript", 200},
		{"/ui/nope.css", "", "", 404},
	}
	for _, tt := range tests {
		rec := record(t, srv, httptest.NewRequest("GET", tt.path, nil))
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) || !strings.Contains(rec.Header().Get("Content-Type"), tt.ctype) {
			t.Errorf("GET %s = %d %q (%s), want %d with %q", tt.path, rec.Code, rec.Body.String(), rec.Header().Get("Content-Type"), tt.status, tt.want)
		}
		if tt.status == 200 && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s has no CSP", tt.path)
		}
	}
	rec := record(t, srv, httptest.NewRequest("GET", "/ui", nil))
	if rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "/ui/" {
		t.Errorf("GET /ui = %d %s, want a redirect to /ui/", rec.Code, rec.Header().Get("Location"))
	}
}
