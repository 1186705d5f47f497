package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/inbox"
	"github.com/sluicehq/sluice/internal/inbox/ssetest"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// TestInboxStreamEndsAtTokenExpiry: an attacker holding a 1-minute inbox
// token opens a stream and keeps it: the stream ends at the first
// heartbeat after the token expires (the server's clock is moved past it;
// heartbeats come every 50ms), as a new request with the token is 401.
func TestInboxStreamEndsAtTokenExpiry(t *testing.T) {
	t.Parallel()
	clock := ratelimittest.NewClock(time.Now())
	b := setupInbox(t, inbox.Options{}, clock.Now)
	sender := b.addKey(t, auth.ScopeNotifySend)
	tok := b.token(t, sender, "u1", `{"ttl":"1m"}`)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)

	s := openStream(t, ts.URL+"/v1/users/u1/inbox/stream?token="+tok, nil)
	s.next(t, "unread")
	s.next(t, ":") // heartbeats go while the token is valid
	clock.Advance(59 * time.Second)
	s.next(t, ":")
	s.next(t, ":")

	clock.Advance(time.Second)
	if resp := b.do(call{method: "GET", path: "/v1/users/u1/inbox", key: tok}); resp.StatusCode != 401 {
		t.Errorf("the expired token on a new request: %d, want 401", resp.StatusCode)
	}
	if !ssetest.Ends(s.events, 5*time.Second) {
		t.Fatal("the stream outlived its token's expiry by 5s")
	}
}

// TestInboxStreamEndsWithItsKey: a stream opened with a notify:read key,
// or with a dashboard session of one, ends at the next heartbeat once the
// key is revoked (DELETE /v1/keys/{id}); a stream opened keyless (no key
// yet) ends once the first key is created.
func TestInboxStreamEndsWithItsKey(t *testing.T) {
	t.Parallel()
	b := setupInbox(t, inbox.Options{}, nil)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	url := ts.URL + "/v1/users/u1/inbox/stream"

	keyless := openStream(t, url, nil)
	keyless.next(t, "unread")
	keyless.next(t, ":")
	admin := b.addKey(t, auth.ScopeAdmin)
	if !ssetest.Ends(keyless.events, 5*time.Second) {
		t.Error("a keyless stream outlived the creation of the first key by 5s")
	}

	reader := b.addKey(t, auth.ScopeNotifyRead)
	byKey := openStream(t, url, http.Header{"Authorization": {"Bearer " + reader}})
	byKey.next(t, "unread")
	sessionKey := b.addKey(t, auth.ScopeNotifyRead)
	cookie, _ := signIn(t, b.bundle, sessionKey)
	bySession := openStream(t, url, http.Header{"Cookie": {cookie.String()}})
	bySession.next(t, "unread")
	byAdmin := openStream(t, url, http.Header{"Authorization": {"Bearer " + admin}})
	byAdmin.next(t, "unread")

	for _, secret := range []string{reader, sessionKey} {
		if resp := b.do(call{method: "DELETE", path: "/v1/keys/" + keyID(t, b.bundle, secret), key: admin}); resp.StatusCode != 204 {
			t.Fatalf("revoke: %d", resp.StatusCode)
		}
	}
	if !ssetest.Ends(byKey.events, 5*time.Second) {
		t.Error("a stream outlived its revoked API key by 5s")
	}
	if !ssetest.Ends(bySession.events, 5*time.Second) {
		t.Error("a session's stream outlived its revoked API key by 5s")
	}
	// The admin's stream, whose key stands, goes on.
	byAdmin.next(t, ":")
	byAdmin.next(t, ":")
}
