package httpapi

import (
	"encoding/base64"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/inbox"
)

// revokeNodes is two nodes on one store: a (setupInbox, its streams'
// heartbeat every heartbeat; 0: the default) and b, with an inbox of its
// own that caches token checks for a minute on clock.
func revokeNodes(t *testing.T, heartbeat time.Duration, clock func() time.Time) (a *inboxBundle, b *bundle) {
	t.Helper()
	secret := []byte("0123456789abcdef0123456789abcdef")
	a = setupInbox(t, inbox.Options{}, nil)
	a.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: a.db, Inbox: a.inbox, InboxHeartbeat: heartbeat,
		UI: UIOptions{Secret: secret}})
	bInbox := inbox.New(inbox.Options{Store: a.db, TokenCacheTTL: time.Minute, Now: clock})
	t.Cleanup(bInbox.Close)
	b = &bundle{t: t, db: a.db, srv: New(Options{Logger: slog.New(slog.DiscardHandler), Keys: a.db, Inbox: bInbox, UI: UIOptions{Secret: secret}})}
	return a, b
}

// TestInboxTokenRevoke: revoking a user's inbox tokens refuses them at
// once on the revoking server (401 problem+json), ends a stream opened
// with one at its next heartbeat, and leaves the user's new tokens and
// other users' tokens working. A second server on the same store, whose
// clock the test moves, refuses them once its cached generation is older
// than its TokenCacheTTL, and takes a new token at once.
func TestInboxTokenRevoke(t *testing.T) {
	t.Parallel()
	now := time.Now()
	a, b := revokeNodes(t, 50*time.Millisecond, func() time.Time { return now })

	sender := a.addKey(t, auth.ScopeNotifySend)
	b.srv.auth.forget()
	old := a.token(t, sender, "u1", "")
	other := a.token(t, sender, "u2", "")
	inboxOf := func(bb *bundle, user, tok string) int {
		t.Helper()
		resp := bb.do(call{method: "GET", path: "/v1/users/" + user + "/inbox?token=" + tok})
		if resp.StatusCode >= 400 {
			decodeProblem(t, resp)
		}
		return resp.StatusCode
	}
	if a, b := inboxOf(a.bundle, "u1", old), inboxOf(b, "u1", old); a != 200 || b != 200 {
		t.Fatalf("before revocation: %d on A, %d on B; want 200", a, b)
	}
	ts := httptest.NewServer(a.srv)
	t.Cleanup(ts.Close)
	s := openStream(t, ts.URL+"/v1/users/u1/inbox/stream?token="+old, nil)
	s.next(t, "unread")

	if resp := a.do(call{method: "DELETE", path: "/v1/users/u1/inbox-tokens"}); resp.StatusCode != 401 {
		t.Errorf("revoke without a key: status %d, want 401", resp.StatusCode)
	}
	if resp := a.do(call{method: "DELETE", path: "/v1/users/u1/inbox-tokens", key: old}); resp.StatusCode != 401 {
		t.Errorf("revoke with an inbox token: status %d, want 401", resp.StatusCode)
	}
	if resp := a.do(call{method: "DELETE", path: "/v1/users/u1/inbox-tokens", key: sender}); resp.StatusCode != 204 {
		t.Fatalf("revoke: status %d, want 204", resp.StatusCode)
	}
	resp := a.do(call{method: "GET", path: "/v1/users/u1/inbox", key: old})
	if p := decodeProblem(t, resp); resp.StatusCode != 401 || p.Detail != "this inbox token has been revoked; ask for a new one" {
		t.Errorf("revoked token on A: %d %+v, want 401 revoked", resp.StatusCode, p)
	}
	for e := range s.events { // the stream ends
		if e.Event != ":" && e.Event != "unread" {
			t.Errorf("revoked stream got %+v", e)
		}
	}
	if got := inboxOf(a.bundle, "u2", other); got != 200 {
		t.Errorf("another user's token after the revocation: %d, want 200", got)
	}

	if got := inboxOf(b, "u1", old); got != 200 {
		t.Errorf("revoked token on B within its cache TTL: %d; want 200 (cached)", got)
	}
	fresh := a.token(t, sender, "u1", "")
	if got := inboxOf(b, "u1", fresh); got != 200 {
		t.Errorf("a token minted after the revocation, on B: %d, want 200", got)
	}
	if got := inboxOf(b, "u1", old); got != 401 {
		t.Errorf("revoked token on B after B saw the new generation: %d, want 401", got)
	}
	if got := inboxOf(a.bundle, "u1", fresh); got != 200 {
		t.Errorf("new token on A: %d, want 200", got)
	}
}

// TestInboxTokenRevokeCacheTTL: a node that cached a user's generation
// before another node revoked refuses the revoked token once the cache
// TTL has passed, without any new token to tell it.
func TestInboxTokenRevokeCacheTTL(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Now()
	a, b := revokeNodes(t, 0, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	sender := a.addKey(t, auth.ScopeNotifySend)
	tok := a.token(t, sender, "u1", "")
	get := func() int {
		t.Helper()
		resp := b.do(call{method: "GET", path: "/v1/users/u1/inbox", key: tok})
		if resp.StatusCode >= 400 {
			decodeProblem(t, resp)
		}
		return resp.StatusCode
	}
	if got := get(); got != 200 {
		t.Fatalf("before revocation on B: %d", got)
	}
	if resp := a.do(call{method: "DELETE", path: "/v1/users/u1/inbox-tokens", key: sender}); resp.StatusCode != 204 {
		t.Fatalf("revoke on A: status %d, want 204", resp.StatusCode)
	}
	mu.Lock()
	now = now.Add(time.Minute - time.Second)
	mu.Unlock()
	if got := get(); got != 200 {
		t.Errorf("on B just within its cache TTL: %d, want 200 (cached)", got)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if got := get(); got != 401 {
		t.Errorf("on B once its cache TTL passed: %d, want 401", got)
	}
}

// TestInboxTokenGenerationIsSigned: the generation a token carries is
// under its signature, with the form's version and a fixed field count:
// neither a token of the first form (a varying field count, no version)
// nor a field moved from one part to another verifies.
func TestInboxTokenGenerationIsSigned(t *testing.T) {
	t.Parallel()
	s := signer{key: []byte("0123456789abcdef0123456789abcdef")}
	now := time.Now()
	exp := now.Add(time.Hour)
	e := strconv.FormatInt(exp.Unix(), 10)
	u1 := base64.RawURLEncoding.EncodeToString([]byte("u1"))
	tests := []struct {
		name    string
		tok     string
		wantGen int64
		wantOK  bool
	}{
		{"generation 0", s.inboxToken("u1", exp, 0), 0, true},
		{"generation 2", s.inboxToken("u1", exp, 2), 2, true},
		{"generation 2 raised to 3", strings.Replace(s.inboxToken("u1", exp, 2), "."+e+".2.", "."+e+".3.", 1), 0, false},
		{"generation dropped", dropGeneration(s.inboxToken("u1", exp, 2)), 0, false},
		{"first form, generation 0", legacyInboxTokenPrefix + u1 + "." + e + "." + s.sign("inbox", "u1", e), 0, false},
		{"first form, generation 2", legacyInboxTokenPrefix + u1 + "." + e + ".2." + s.sign("inbox", "u1", e, "2"), 0, false},
		{"first form's MAC under the new prefix", inboxTokenPrefix + u1 + "." + e + ".2." + s.sign("inbox", "u1", e, "2"), 0, false},
		{"expired", s.inboxToken("u1", now.Add(-time.Second), 2), 0, false},
		{"five parts", s.inboxToken("u1", exp, 2) + ".x", 0, false},
	}
	for _, tt := range tests {
		user, gen, ok := s.parseInboxToken(tt.tok, now)
		if ok != tt.wantOK || gen != tt.wantGen || (ok && user != "u1") {
			t.Errorf("%s: parseInboxToken(%q) = %q, %d, %v; want u1, %d, %v", tt.name, tt.tok, user, gen, ok, tt.wantGen, tt.wantOK)
		}
	}
}

// dropGeneration removes the generation part of a token.
func dropGeneration(tok string) string {
	parts := strings.Split(tok, ".")
	return strings.Join(append(parts[:3], parts[4:]...), ".")
}

// TestInboxTokenOfTheFirstFormRefused: a token of the first form, whose
// MAC did not bind its field count (so a user id holding a NUL could
// shift the fields of one token into another's), signed under this very
// server's secret, is 401 on a real listener, in the query and as a
// bearer; a token minted now works.
func TestInboxTokenOfTheFirstFormRefused(t *testing.T) {
	t.Parallel()
	b := setupInbox(t, inbox.Options{}, nil)
	sender := b.addKey(t, auth.ScopeNotifySend)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	e := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	s := b.srv.auth.signer
	old := legacyInboxTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte("u1")) + "." + e + "." + s.sign("inbox", "u1", e)
	if st, _, body := wire(t, "GET", ts.URL+"/v1/users/u1/inbox?token="+old, "", "", nil); st != 401 || !strings.Contains(string(body), "no longer accepted") {
		t.Errorf("a first-form token in the query: %d %s, want 401", st, body)
	}
	if st, _, body := wire(t, "GET", ts.URL+"/v1/users/u1/inbox", old, "", nil); st != 401 || !strings.Contains(string(body), "no longer accepted") {
		t.Errorf("a first-form token as a bearer: %d %s, want 401", st, body)
	}
	fresh := b.token(t, sender, "u1", "")
	if !strings.HasPrefix(fresh, inboxTokenPrefix) {
		t.Errorf("a new token %q lacks the prefix %q", fresh, inboxTokenPrefix)
	}
	if st, _, body := wire(t, "GET", ts.URL+"/v1/users/u1/inbox", fresh, "", nil); st != 200 {
		t.Errorf("a new token: %d %s, want 200", st, body)
	}
}
