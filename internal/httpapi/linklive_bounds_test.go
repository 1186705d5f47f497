package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/linklive"
)

// TestLinkLiveStreamsFillTheirCaps: one API key opens live stats streams
// of its link through a real listener until its cap (MaxPerCaller): the
// next is 429 problem+json with Retry-After naming
// links.live.max_streams_per_key. Another key still gets streams up to
// the node's cap, past which it is refused the same way naming
// links.live.max_streams. Each open stream (the server's goroutines,
// buffers and its subscription's buffer of hits; the client side is a bare
// socket) costs under 64 KiB of live memory; hanging up frees its place.
// The measured figure is in the test's log (docs/security.md, "Bounds").
func TestLinkLiveStreamsFillTheirCaps(t *testing.T) {
	// Not parallel: the memory measured is this test's alone.
	const perKey, extra = 300, 10
	b := setupLiveBeat(t, linklive.Options{MaxStreams: perKey + extra, MaxPerCaller: perKey}, time.Minute)
	key := b.addKey(t, auth.ScopeLinksWrite)
	other := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b.bundle, key, `{"url":"https://example.com/spring"}`)
	m := createLink(t, b.bundle, other, `{"url":"https://example.com/summer"}`)
	addr := b.url[len("http://"):]

	before := liveBytes()
	conns := make([]*rawStream, 0, perKey)
	for i := range perKey {
		s := openRaw(t, addr, "/v1/links/"+l.Code+"/stats/stream", key)
		if s.status != http.StatusOK {
			t.Fatalf("the key's stream %d: status %d %s, want 200", i, s.status, s.body)
		}
		conns = append(conns, s)
	}
	if n := b.hub.Streams(); n != perKey {
		t.Fatalf("Streams() = %d with %d open", n, perKey)
	}
	per := perEntry(t, "an open live stats stream", before, liveBytes(), perKey)
	if per > 64<<10 {
		t.Errorf("an open live stats stream holds %.0f bytes, past the documented bound's margin of 64 KiB", per)
	}

	openRaw(t, addr, "/v1/links/"+l.Code+"/stats/stream", key).refusedAt429(t, "the key past its cap", "links.live.max_streams_per_key")
	for i := range extra {
		if s := openRaw(t, addr, "/v1/links/"+m.Code+"/stats/stream", other); s.status != http.StatusOK {
			t.Fatalf("the other key's stream %d: status %d %s", i, s.status, s.body)
		}
	}
	openRaw(t, addr, "/v1/links/"+m.Code+"/stats/stream", other).refusedAt429(t, "a stream past the node's cap", "links.live.max_streams")

	for _, s := range conns[:100] {
		s.conn.Close()
	}
	enginetest.Eventually(t, time.Minute, "hung-up streams freed", func() bool { return b.hub.Streams() == perKey+extra-100 })
	if s := openRaw(t, addr, "/v1/links/"+l.Code+"/stats/stream", key); s.status != http.StatusOK {
		t.Errorf("the key after hanging up 100: status %d %s, want 200", s.status, s.body)
	}
}
