package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/inbox/ssetest"
	"github.com/sluicehq/sluice/internal/linklive"
	"github.com/sluicehq/sluice/internal/linklive/natsbus"
	"github.com/sluicehq/sluice/internal/queue"
	"github.com/sluicehq/sluice/internal/shorten"
)

// liveBundle is a shortener whose recorded hits go through a real feed:
// an embedded NATS, the LINK_HITS stream, a Bus and a Hub.
type liveBundle struct {
	*bundle
	svc *shorten.Service
	hub *linklive.Hub
	url string // the test server's root
}

func setupLive(t *testing.T, opts linklive.Options) *liveBundle {
	t.Helper()
	return setupLiveBeat(t, opts, 50*time.Millisecond)
}

// setupLiveBeat is setupLive with streams' heartbeats every heartbeat.
func setupLiveBeat(t *testing.T, opts linklive.Options, heartbeat time.Duration) *liveBundle {
	t.Helper()
	b := setup(t)
	ctx := t.Context()
	q, err := queue.Open(ctx, queue.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	stream, err := q.EnsureStream(ctx, natsbus.StreamConfig(q.Name("LINK_HITS"), q.Name("links.hits"), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	bus := natsbus.NewBus(q.NATS(), stream, q.Name("links.hits"), nil)
	if opts.Replay == nil {
		opts.Replay = bus.Since
	}
	hub := linklive.NewHub(opts)
	t.Cleanup(hub.Close)
	stop, err := bus.Listen(ctx, hub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- bus.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-ran })
	svc := newLinks(t, shorten.Options{Store: b.db, Targets: ownHost, OnRecorded: bus.Publish})
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Links: svc, LinkLive: hub, LinkLiveHeartbeat: heartbeat})
	// A write timeout far shorter than the streams' lives: each write of
	// a stream has a deadline of its own instead.
	ts := httptest.NewUnstartedServer(b.srv)
	ts.Config.WriteTimeout = 300 * time.Millisecond
	ts.Start()
	t.Cleanup(ts.Close)
	return &liveBundle{bundle: b, svc: svc, hub: hub, url: ts.URL}
}

// liveStream is one open stream; hangUp closes it from the client's side.
type liveStream struct {
	resp   *http.Response
	events <-chan ssetest.Event
	hangUp context.CancelFunc
}

func (b *liveBundle) open(t *testing.T, code, key string, header http.Header) *liveStream {
	t.Helper()
	return b.openQuery(t, code, "", key, header)
}

func (b *liveBundle) openQuery(t *testing.T, code, query, key string, header http.Header) *liveStream {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", b.url+"/v1/links/"+code+"/stats/stream"+query, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	s := &liveStream{resp: resp, hangUp: cancel}
	if resp.StatusCode == http.StatusOK {
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("Content-Type = %q, want text/event-stream", ct)
		}
		s.events = ssetest.Read(resp.Body, 100)
	}
	return s
}

// click redirects code as a browser would and records it (the flusher).
func (b *liveBundle) click(t *testing.T, c call) {
	t.Helper()
	c.method = "GET"
	if resp := b.do(c); resp.StatusCode != http.StatusFound {
		t.Fatalf("GET %s = %d, want 302", c.path, resp.StatusCode)
	}
	if err := b.svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func decodeHit(t *testing.T, e ssetest.Event) linkHitJSON {
	t.Helper()
	var h linkHitJSON
	if err := json.Unmarshal([]byte(e.Data), &h); err != nil {
		t.Fatalf("hit %q: %v", e.Data, err)
	}
	return h
}

// TestLinkLiveStream: the owner's stream gets each recorded hit, human or
// bot, with its dimensions and an id; heartbeats go while it is idle; a
// reconnect with Last-Event-ID gets the hits after that id and no
// earlier one. Another key's link is 404, no key 401, a bad
// Last-Event-ID 400, each problem+json before any stream starts.
func TestLinkLiveStream(t *testing.T) {
	t.Parallel()
	b := setupLive(t, linklive.Options{})
	key := b.addKey(t, auth.ScopeLinksWrite)
	other := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b.bundle, key, `{"url":"https://example.com/spring"}`)

	for _, tt := range []struct {
		name   string
		key    string
		header http.Header
		want   int
	}{
		{"another key's link", other, nil, http.StatusNotFound},
		{"no key", "", nil, http.StatusUnauthorized},
		{"bad Last-Event-ID", key, http.Header{"Last-Event-Id": {"x"}}, http.StatusBadRequest},
	} {
		s := b.open(t, l.Code, tt.key, tt.header)
		if s.resp.StatusCode != tt.want || s.resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s, want %d problem+json", tt.name, s.resp.StatusCode, s.resp.Header.Get("Content-Type"), tt.want)
		}
	}

	s := b.open(t, l.Code, key, nil)
	if s.resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: status %d", s.resp.StatusCode)
	}
	ssetest.Next(t, s.events, ":", 5*time.Second) // a heartbeat while idle
	b.click(t, call{path: "/" + l.Code, userAgent: iphone, header: http.Header{"Accept-Language": {"fr-FR,fr;q=0.9"}, "Referer": {"https://t.co/abc"}}})
	first := ssetest.Next(t, s.events, "hit", 5*time.Second)
	got := decodeHit(t, first)
	want := linkHitJSON{Code: l.Code, At: got.At, Source: "link", Device: "mobile", OS: "ios", Referrer: "t.co", Language: "fr"}
	if got != want || time.Since(got.At) > time.Minute {
		t.Errorf("hit = %+v, want %+v", got, want)
	}
	if n, err := strconv.ParseUint(first.ID, 10, 64); err != nil || n == 0 {
		t.Errorf("hit id %q, want a positive integer", first.ID)
	}
	b.click(t, call{path: "/" + l.Code, userAgent: "curl/8.5.0"})
	second := ssetest.Next(t, s.events, "hit", 5*time.Second)
	if h := decodeHit(t, second); !h.Bot || h.BotReason == "" || second.ID <= first.ID && len(second.ID) <= len(first.ID) {
		t.Errorf("bot hit = %+v (id %s after %s), want bot with a reason and a later id", h, second.ID, first.ID)
	}

	resumed := b.open(t, l.Code, key, http.Header{"Last-Event-Id": {first.ID}})
	if e := ssetest.Next(t, resumed.events, "hit", 5*time.Second); e.ID != second.ID || !decodeHit(t, e).Bot {
		t.Errorf("resumed after %s: first event %+v, want the bot hit %s", first.ID, e, second.ID)
	}
	ssetest.Next(t, resumed.events, ":", 5*time.Second) // and nothing else before the heartbeat
	byQuery := b.openQuery(t, l.Code, "?last_event_id="+second.ID, key, nil)
	b.click(t, call{path: "/" + l.Code, userAgent: browser})
	if e := ssetest.Next(t, byQuery.events, "hit", 5*time.Second); e.ID <= second.ID && len(e.ID) <= len(second.ID) || decodeHit(t, e).Bot {
		t.Errorf("resumed after the last hit: %+v, want the new click only", e)
	}
}

// TestLinkLiveStreamLimits: a flood of streams is refused past the
// node's cap (429 problem+json with Retry-After), and a client that hangs
// up mid-stream frees its place.
func TestLinkLiveStreamLimits(t *testing.T) {
	t.Parallel()
	b := setupLive(t, linklive.Options{MaxStreams: 3})
	key := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b.bundle, key, `{"url":"https://example.com/spring"}`)
	var open []*liveStream
	for i := range 10 {
		s := b.open(t, l.Code, key, nil)
		switch {
		case i < 3 && s.resp.StatusCode != http.StatusOK:
			t.Fatalf("stream %d: status %d, want 200", i, s.resp.StatusCode)
		case i < 3:
			open = append(open, s)
		case s.resp.StatusCode != http.StatusTooManyRequests || s.resp.Header.Get("Retry-After") == "":
			t.Errorf("stream %d past the cap: status %d, Retry-After %q; want 429 with one", i, s.resp.StatusCode, s.resp.Header.Get("Retry-After"))
		default:
			if p := decodeProblem(t, s.resp); p.Status != 429 {
				t.Errorf("429 problem %+v", p)
			}
		}
	}
	b.click(t, call{path: "/" + l.Code, userAgent: browser})
	ssetest.Next(t, open[1].events, "hit", 5*time.Second)
	open[1].hangUp()
	enginetest.Eventually(t, 5*time.Second, "the hung-up stream's place freed", func() bool { return b.hub.Streams() == 2 })
	if s := b.open(t, l.Code, key, nil); s.resp.StatusCode != http.StatusOK {
		t.Errorf("a stream after one hung up: status %d, want 200", s.resp.StatusCode)
	}
	b.click(t, call{path: "/" + l.Code, userAgent: browser})
	for _, i := range []int{0, 2} { // the others went on
		ssetest.Next(t, open[i].events, "hit", 5*time.Second)
	}
	// Counted once written: 3 of the first hit, 3 of the second.
	enginetest.Eventually(t, 5*time.Second, "6 hits counted sent", func() bool { sent, _ := b.hub.Counts(); return sent == 6 })
}

// TestLinkLiveStreamsPerKey: one key's streams are capped apart from the
// node's (429 problem+json with Retry-After), and another key still gets
// its stream.
func TestLinkLiveStreamsPerKey(t *testing.T) {
	t.Parallel()
	b := setupLive(t, linklive.Options{MaxStreams: 100, MaxPerCaller: 2})
	key := b.addKey(t, auth.ScopeLinksWrite)
	other := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b.bundle, key, `{"url":"https://example.com/spring"}`)
	m := createLink(t, b.bundle, other, `{"url":"https://example.com/summer"}`)
	for i := range 2 {
		if s := b.open(t, l.Code, key, nil); s.resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: status %d, want 200", i, s.resp.StatusCode)
		}
	}
	s := b.open(t, l.Code, key, nil)
	if s.resp.StatusCode != http.StatusTooManyRequests || s.resp.Header.Get("Retry-After") == "" {
		t.Errorf("the key's third stream: status %d, Retry-After %q; want 429 with one", s.resp.StatusCode, s.resp.Header.Get("Retry-After"))
	} else if p := decodeProblem(t, s.resp); p.Status != 429 {
		t.Errorf("429 problem %+v", p)
	}
	if s := b.open(t, m.Code, other, nil); s.resp.StatusCode != http.StatusOK {
		t.Errorf("another key's stream: status %d, want 200", s.resp.StatusCode)
	}
}

// TestLinkLiveStreamEndsWithItsKey: a stream opened keyless (no key yet)
// ends once the first key is created; one opened with a key ends at the
// next heartbeat once the key is revoked; an admin's stream of the same
// link goes on, and the ended streams' places are freed.
func TestLinkLiveStreamEndsWithItsKey(t *testing.T) {
	t.Parallel()
	b := setupLive(t, linklive.Options{})
	keyless := createLink(t, b.bundle, "", `{"url":"https://example.com/keyless"}`)
	s := b.open(t, keyless.Code, "", nil)
	ssetest.Next(t, s.events, ":", 5*time.Second)
	admin := b.addKey(t, auth.ScopeAdmin)
	if !ssetest.Ends(s.events, 5*time.Second) {
		t.Error("a keyless stream outlived the creation of the first key by 5s")
	}

	key := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b.bundle, key, `{"url":"https://example.com/spring"}`)
	byKey := b.open(t, l.Code, key, nil)
	byAdmin := b.open(t, l.Code, admin, nil)
	ssetest.Next(t, byKey.events, ":", 5*time.Second)
	if resp := b.do(call{method: "DELETE", path: "/v1/keys/" + keyID(t, b.bundle, key), key: admin}); resp.StatusCode != 204 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if !ssetest.Ends(byKey.events, 5*time.Second) {
		t.Fatal("the stream outlived its revoked key by 5s")
	}
	// Past the server's write timeout, the admin's stream goes on.
	for start := time.Now(); time.Since(start) < 500*time.Millisecond; {
		ssetest.Next(t, byAdmin.events, ":", 5*time.Second)
	}
	enginetest.Eventually(t, 5*time.Second, "only the admin's stream open", func() bool { return b.hub.Streams() == 1 })
}

// TestLinkLiveStreamEndsWithItsLink: a stream ends at the next heartbeat
// once its link is deleted; a reconnect is 404.
func TestLinkLiveStreamEndsWithItsLink(t *testing.T) {
	t.Parallel()
	b := setupLive(t, linklive.Options{})
	key := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b.bundle, key, `{"url":"https://example.com/spring"}`)
	s := b.open(t, l.Code, key, nil)
	ssetest.Next(t, s.events, ":", 5*time.Second)
	if resp := b.do(call{method: "DELETE", path: "/v1/links/" + l.Code, key: key}); resp.StatusCode != 204 {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if !ssetest.Ends(s.events, 5*time.Second) {
		t.Fatal("the stream outlived its deleted link by 5s")
	}
	if again := b.open(t, l.Code, key, nil); again.resp.StatusCode != http.StatusNotFound {
		t.Errorf("reconnect after the delete: %d, want 404", again.resp.StatusCode)
	}
}

// TestLinkLiveStreamReplayFails: when the hits after Last-Event-ID cannot
// be read, the stream is refused with 503 problem+json and Retry-After
// (the client retries) rather than started with a gap; without
// Last-Event-ID it starts.
func TestLinkLiveStreamReplayFails(t *testing.T) {
	t.Parallel()
	b := setupLive(t, linklive.Options{Replay: func(context.Context, int64, uint64, int) ([]linklive.Hit, error) {
		return nil, errors.New("nats: timeout")
	}})
	key := b.addKey(t, auth.ScopeLinksWrite)
	l := createLink(t, b.bundle, key, `{"url":"https://example.com/spring"}`)
	s := b.open(t, l.Code, key, http.Header{"Last-Event-Id": {"5000"}})
	if s.resp.StatusCode != http.StatusServiceUnavailable || s.resp.Header.Get("Retry-After") == "" {
		t.Fatalf("resume with the replay failing: %d, Retry-After %q; want 503 with one", s.resp.StatusCode, s.resp.Header.Get("Retry-After"))
	}
	if p := decodeProblem(t, s.resp); strings.Contains(p.Detail, "nats") {
		t.Errorf("the problem %q shows the cause to the client", p.Detail)
	}
	if s := b.open(t, l.Code, key, nil); s.resp.StatusCode != http.StatusOK {
		t.Errorf("without Last-Event-ID: %d, want 200", s.resp.StatusCode)
	}
	if got := b.hub.Streams(); got > 1 {
		t.Errorf("Streams() = %d; the refused stream kept its place", got)
	}
}
