package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/inbox"
)

// TestInboxStreamsFillTheirCaps: one API key opens inbox streams for many
// users (five each) through a real listener until its cap
// (MaxStreamsPerKey): the next is 429 problem+json with Retry-After
// naming notify.inbox.max_streams_per_key, whichever user it names.
// Another key still gets streams, up to a user's cap and then the node's,
// each refused the same way naming its setting; an inbox token is
// bounded per user. Each open stream (the server's goroutines, buffers
// and subscription; the client side is a bare socket) costs under 64 KiB
// of live memory; hanging up frees its place. The measured figure is in
// the test's log (docs/security.md, "Bounds").
func TestInboxStreamsFillTheirCaps(t *testing.T) {
	// Not parallel: the memory measured is this test's alone.
	const perKey, extra = 500, 10
	b := setup(t)
	svc := inbox.New(inbox.Options{Store: b.db, MaxStreams: perKey + extra, MaxStreamsPerKey: perKey})
	t.Cleanup(svc.Close)
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Inbox: svc, InboxHeartbeat: time.Minute})
	ib := &inboxBundle{bundle: b, inbox: svc}
	keyA := b.addKey(t, auth.ScopeNotifyRead)
	keyB := b.addKey(t, auth.ScopeNotifyRead, auth.ScopeNotifySend)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()
	path := func(user string) string { return "/v1/users/" + user + "/inbox/stream" }

	before := liveBytes()
	conns := make([]*rawStream, 0, perKey)
	for i := range perKey {
		s := openRaw(t, addr, path(fmt.Sprintf("u%d", i/5)), keyA)
		if s.status != http.StatusOK {
			t.Fatalf("key A's stream %d: status %d %s, want 200", i, s.status, s.body)
		}
		conns = append(conns, s)
	}
	if n := svc.Streams(); n != perKey {
		t.Fatalf("Streams() = %d with %d open", n, perKey)
	}
	per := perEntry(t, "an open inbox stream", before, liveBytes(), perKey)
	if per > 64<<10 {
		t.Errorf("an open inbox stream holds %.0f bytes, past the documented bound's margin of 64 KiB", per)
	}

	openRaw(t, addr, path("someone-new"), keyA).refusedAt429(t, "key A past its cap", "notify.inbox.max_streams_per_key")
	openRaw(t, addr, path("u0"), keyB).refusedAt429(t, "a sixth stream of u0", "notify.inbox.max_streams_per_user")
	tok := ib.token(t, keyB, "t1", "")
	for i := range 5 {
		if s := openRaw(t, addr, path("t1")+"?token="+tok, ""); s.status != http.StatusOK {
			t.Fatalf("token stream %d: status %d %s", i, s.status, s.body)
		}
	}
	openRaw(t, addr, path("t1")+"?token="+tok, "").refusedAt429(t, "a token's sixth stream", "notify.inbox.max_streams_per_user")
	for i := 5; i < extra; i++ {
		if s := openRaw(t, addr, path(fmt.Sprintf("b%d", i)), keyB); s.status != http.StatusOK {
			t.Fatalf("key B's stream %d: status %d %s", i, s.status, s.body)
		}
	}
	openRaw(t, addr, path("b-last"), keyB).refusedAt429(t, "a stream past the node's cap", "notify.inbox.max_streams")

	for _, s := range conns[:100] {
		s.conn.Close()
	}
	enginetest.Eventually(t, time.Minute, "hung-up streams freed", func() bool { return svc.Streams() == perKey+extra-100 })
	if s := openRaw(t, addr, path("someone-new"), keyA); s.status != http.StatusOK {
		t.Errorf("key A after hanging up 100: status %d %s, want 200", s.status, strings.TrimSpace(s.body))
	}
}
