package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/inbox"
)

const (
	allowedOrigin = "https://app.example.com"
	otherOrigin   = "https://evil.example"
)

// corsBundle is an inbox server allowing allowedOrigin, on a real
// listener, with a user u1 holding one message and an inbox token.
type corsBundle struct {
	*inboxBundle
	url, token string
}

func setupCORS(t *testing.T, keyless bool, origins ...string) *corsBundle {
	t.Helper()
	b := setupInbox(t, inbox.Options{}, nil)
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Inbox: b.inbox, InboxHeartbeat: 50 * time.Millisecond,
		CORSOrigins: origins, UI: UIOptions{Assets: fstest.MapFS{"inbox.js": {Data: []byte("export {};\n")}}}})
	key := ""
	if !keyless {
		key = b.addKey(t, auth.ScopeNotifySend)
	}
	tok := b.token(t, key, "u1", "")
	b.deliver(t, "u1", "n1")
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	return &corsBundle{inboxBundle: b, url: ts.URL, token: tok}
}

// browserCall sends what a browser would from a page on origin (none:
// the server's own page or no browser), with extra headers.
func (b *corsBundle) browserCall(t *testing.T, method, path, origin string, header map[string]string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, method, b.url+path, nil)
	if origin != "" {
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// corsHeaderNames are every header CORS defines on an answer.
var corsHeaderNames = []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers",
	"Access-Control-Max-Age", "Access-Control-Expose-Headers", "Access-Control-Allow-Credentials"}

func noCORSHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	for _, h := range corsHeaderNames {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("%s: %s = %q, want none", what, h, v)
		}
	}
}

func wantHeaders(t *testing.T, what string, resp *http.Response, want map[string]string) {
	t.Helper()
	for h, v := range want {
		if got := strings.Join(resp.Header.Values(h), ", "); got != v {
			t.Errorf("%s: %s = %q, want %q", what, h, got, v)
		}
	}
}

// TestCORSPreflight: an allowed origin's preflight is answered 204 with
// exactly the contract's headers, whatever the path; another origin's
// gets what it always got (405) and no CORS header.
func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	b := setupCORS(t, false, allowedOrigin, "http://localhost:3000")
	preflight := map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
	for _, path := range []string{"/v1/users/u1/inbox/n1/read", "/v1/users/u1/inbox/stream", "/no/such/route"} {
		resp := b.browserCall(t, "OPTIONS", path, allowedOrigin, preflight)
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("preflight of %s = %d, want 204", path, resp.StatusCode)
		}
		wantHeaders(t, "preflight of "+path, resp, map[string]string{
			"Access-Control-Allow-Origin":      allowedOrigin,
			"Access-Control-Allow-Methods":     "GET, HEAD, POST, PUT, PATCH, DELETE",
			"Access-Control-Allow-Headers":     "Authorization, Content-Type, Idempotency-Key, Last-Event-ID",
			"Access-Control-Max-Age":           "7200",
			"Access-Control-Allow-Credentials": "",
			"Vary":                             "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
		})
	}
	if resp := b.browserCall(t, "OPTIONS", "/v1/users/u1/inbox", "http://localhost:3000", preflight); resp.StatusCode != 204 ||
		resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Errorf("preflight from the second origin = %d, ACAO %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	for _, origin := range []string{otherOrigin, "https://app.example.com.evil.example", "http://app.example.com", "https://app.example.com:8443", "null"} {
		resp := b.browserCall(t, "OPTIONS", "/v1/users/u1/inbox/n1/read", origin, preflight)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("preflight from %s = %d, want 405 (not answered)", origin, resp.StatusCode)
		}
		noCORSHeaders(t, "preflight from "+origin, resp)
		wantHeaders(t, "preflight from "+origin, resp, map[string]string{"Vary": "Origin"})
	}
	// OPTIONS without Access-Control-Request-Method is no preflight.
	resp := b.browserCall(t, "OPTIONS", "/v1/users/u1/inbox", allowedOrigin, nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Access-Control-Allow-Origin") != allowedOrigin {
		t.Errorf("plain OPTIONS = %d, ACAO %q; want 405 readable by the page", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

// TestCORSAnswers: every answer to an allowed origin (success, refusal,
// the event stream, a state change with an inbox token) carries
// Access-Control-Allow-Origin and the exposed headers; another origin's
// carries none, though the server still answers it.
func TestCORSAnswers(t *testing.T) {
	t.Parallel()
	b := setupCORS(t, false, allowedOrigin)
	bearer := map[string]string{"Authorization": "Bearer " + b.token}
	exposed := "Retry-After, X-Request-Id, Location, RateLimit, RateLimit-Policy, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset"
	allowed := map[string]string{"Access-Control-Allow-Origin": allowedOrigin, "Access-Control-Expose-Headers": exposed,
		"Vary": "Origin", "Access-Control-Allow-Credentials": ""}
	tests := []struct {
		name, method, path string
		header             map[string]string
		status             int
	}{
		{"list", "GET", "/v1/users/u1/inbox", bearer, 200},
		{"list without a token", "GET", "/v1/users/u1/inbox", nil, 401},
		{"another user's inbox", "GET", "/v1/users/u2/inbox", bearer, 403},
		{"mark read", "POST", "/v1/users/u1/inbox/n1/read", bearer, 200},
		{"unknown route", "GET", "/v1/nothing", nil, 404},
	}
	for _, tt := range tests {
		resp := b.browserCall(t, tt.method, tt.path, allowedOrigin, tt.header)
		if resp.StatusCode != tt.status {
			t.Errorf("%s from an allowed origin = %d, want %d", tt.name, resp.StatusCode, tt.status)
		}
		wantHeaders(t, tt.name+" from an allowed origin", resp, allowed)
		resp = b.browserCall(t, tt.method, tt.path, otherOrigin, tt.header)
		noCORSHeaders(t, tt.name+" from another origin", resp)
		wantHeaders(t, tt.name+" from another origin", resp, map[string]string{"Vary": "Origin"})
	}

	// The stream, as EventSource opens it: the token in the query.
	resp := b.browserCall(t, "GET", "/v1/users/u1/inbox/stream?token="+b.token, allowedOrigin, map[string]string{"Accept": "text/event-stream"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	wantHeaders(t, "stream", resp, allowed)
	resp = b.browserCall(t, "GET", "/v1/users/u1/inbox/stream?token="+b.token, otherOrigin, nil)
	noCORSHeaders(t, "stream from another origin", resp)
}

// TestCORSKeyless: CORS changes no authorization. On a keyless node a
// page of an allowed origin may read, and change its inbox with an inbox
// token, but changes nothing else: unsafe methods without a token stay
// same-origin only, as http.CrossOriginProtection has them.
func TestCORSKeyless(t *testing.T) {
	t.Parallel()
	b := setupCORS(t, true, allowedOrigin)
	if resp := b.browserCall(t, "POST", "/v1/users/u1/inbox/n1/read", allowedOrigin, map[string]string{"Authorization": "Bearer " + b.token}); resp.StatusCode != 200 {
		t.Errorf("mark read with a token = %d, want 200", resp.StatusCode)
	}
	resp := b.browserCall(t, "POST", "/v1/users/u1/inbox/read-all", allowedOrigin, nil)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != allowedOrigin {
		t.Errorf("keyless read-all from another origin = %d (ACAO %q), want 403 the page can read", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	} else if p := decodeProblem(t, resp); !strings.Contains(p.Detail, "cross-origin request refused") {
		t.Errorf("keyless read-all refused with %q, want the cross-origin refusal", p.Detail)
	}
	if resp := b.browserCall(t, "GET", "/v1/users/u1/inbox", allowedOrigin, nil); resp.StatusCode != 200 {
		t.Errorf("keyless list = %d, want 200", resp.StatusCode)
	}
}

// TestCORSOff: with no origin configured nothing changes: no CORS header,
// no Vary, preflights unanswered.
func TestCORSOff(t *testing.T) {
	t.Parallel()
	b := setupCORS(t, false)
	resp := b.browserCall(t, "OPTIONS", "/v1/users/u1/inbox", allowedOrigin, map[string]string{"Access-Control-Request-Method": "GET"})
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("preflight = %d, want 405", resp.StatusCode)
	}
	noCORSHeaders(t, "preflight", resp)
	resp = b.browserCall(t, "GET", "/v1/users/u1/inbox", allowedOrigin, map[string]string{"Authorization": "Bearer " + b.token})
	noCORSHeaders(t, "list", resp)
	if v := resp.Header.Get("Vary"); v != "" {
		t.Errorf("Vary = %q, want none", v)
	}
}

// TestCORSEveryOrigin: "*" echoes any origin (never a literal *, which a
// page's credentialed request could not use either way).
func TestCORSEveryOrigin(t *testing.T) {
	t.Parallel()
	b := setupCORS(t, false, "*")
	resp := b.browserCall(t, "OPTIONS", "/v1/users/u1/inbox", otherOrigin, map[string]string{"Access-Control-Request-Method": "GET"})
	wantHeaders(t, "preflight", resp, map[string]string{"Access-Control-Allow-Origin": otherOrigin})
	resp = b.browserCall(t, "GET", "/v1/users/u1/inbox", otherOrigin, map[string]string{"Authorization": "Bearer " + b.token})
	wantHeaders(t, "list", resp, map[string]string{"Access-Control-Allow-Origin": otherOrigin})
}

// TestInboxElementServed: /ui/inbox.js is a JavaScript module any page
// may load (a module script is fetched in CORS mode), even from an origin
// the API does not allow.
func TestInboxElementServed(t *testing.T) {
	t.Parallel()
	for _, origins := range [][]string{nil, {allowedOrigin}} {
		b := setupCORS(t, false, origins...)
		for _, origin := range []string{otherOrigin, allowedOrigin, ""} {
			resp := b.browserCall(t, "GET", "/ui/inbox.js", origin, nil)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(body) != "export {};\n" {
				t.Errorf("origins %q: GET /ui/inbox.js from %q = %d %q", origins, origin, resp.StatusCode, body)
			}
			wantHeaders(t, "inbox.js", resp, map[string]string{"Content-Type": "text/javascript; charset=utf-8",
				"Access-Control-Allow-Origin": "*", "X-Content-Type-Options": "nosniff"})
		}
	}
}
