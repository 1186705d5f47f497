package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/inbox"
	"github.com/sluicehq/sluice/internal/inbox/ssetest"
)

// inboxBundle is a server with an inbox on the bundle's SQLite store.
type inboxBundle struct {
	*bundle
	inbox *inbox.Service
}

func setupInbox(t *testing.T, opts inbox.Options, now func() time.Time) *inboxBundle {
	t.Helper()
	b := setup(t)
	opts.Store = b.db
	svc := inbox.New(opts)
	t.Cleanup(svc.Close)
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Inbox: svc, InboxHeartbeat: 50 * time.Millisecond, Now: now})
	return &inboxBundle{bundle: b, inbox: svc}
}

func (b *inboxBundle) deliver(t *testing.T, user, id string) inbox.Message {
	t.Helper()
	m, err := b.inbox.Deliver(t.Context(), inbox.Message{ID: id, UserID: user, Type: "order.shipped", Category: "orders",
		Subject: "Order " + id + " shipped", Body: "On its way"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (b *inboxBundle) token(t *testing.T, key, user, body string) string {
	t.Helper()
	resp := b.do(call{method: "POST", path: "/v1/users/" + user + "/inbox-token", key: key, body: body})
	var got struct {
		Token, URL string
		ExpiresAt  time.Time `json:"expires_at"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&got) != nil || !strings.HasSuffix(got.URL, "/ui/inbox#t="+got.Token) {
		t.Fatalf("inbox-token: status %d, %+v", resp.StatusCode, got)
	}
	return got.Token
}

// TestInboxTokenAuth: a user's inbox token opens that user's inbox, in the
// query or a bearer header, and nothing else; expired or altered tokens
// are refused; an API key with the scope works as ever.
func TestInboxTokenAuth(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clock := func() time.Time { return now }
	b := setupInbox(t, inbox.Options{}, func() time.Time { return clock() })
	sender := b.addKey(t, auth.ScopeNotifySend)
	reader := b.addKey(t, auth.ScopeNotifyRead)
	tok := b.token(t, sender, "u1", `{"ttl":"1h"}`)
	b.deliver(t, "u1", "n1")

	tests := []struct {
		name   string
		call   call
		status int
	}{
		{"token in the query", call{method: "GET", path: "/v1/users/u1/inbox?token=" + tok}, 200},
		{"token as bearer", call{method: "GET", path: "/v1/users/u1/inbox", key: tok}, 200},
		{"token may change its inbox", call{method: "POST", path: "/v1/users/u1/inbox/n1/read", key: tok}, 200},
		{"another user's inbox", call{method: "GET", path: "/v1/users/u2/inbox?token=" + tok}, 403},
		{"altered token", call{method: "GET", path: "/v1/users/u1/inbox?token=" + tok + "x"}, 401},
		{"no credential", call{method: "GET", path: "/v1/users/u1/inbox"}, 401},
		{"a token opens no other route", call{method: "GET", path: "/v1/users/u1/notifications", key: tok}, 401},
		{"api key with the scope", call{method: "GET", path: "/v1/users/u1/inbox", key: reader}, 200},
		{"api key without the scope", call{method: "POST", path: "/v1/users/u1/inbox/read-all", key: reader}, 403},
		{"ttl out of range", call{method: "POST", path: "/v1/users/u1/inbox-token", key: sender, body: `{"ttl":"1s"}`}, 422},
	}
	for _, tt := range tests {
		resp := b.do(tt.call)
		if resp.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, resp.StatusCode, tt.status)
		}
		if resp.StatusCode >= 400 {
			decodeProblem(t, resp)
		}
	}
	clock = func() time.Time { return now.Add(time.Hour + time.Second) }
	if resp := b.do(call{method: "GET", path: "/v1/users/u1/inbox?token=" + tok}); resp.StatusCode != 401 {
		t.Errorf("expired token: status %d, want 401", resp.StatusCode)
	}
	if _, _, ok := b.srv.auth.signer.parsePreferenceToken(strings.TrimPrefix(tok, inboxTokenPrefix), now); ok {
		t.Error("an inbox token opened the preference page")
	}
}

type inboxPageJSON struct {
	Items []struct {
		ID   string
		Seq  int64
		Read bool
	}
	Unread     int
	NextCursor string `json:"next_cursor"`
}

func (b *inboxBundle) page(t *testing.T, key, query string) inboxPageJSON {
	t.Helper()
	resp := b.do(call{method: "GET", path: "/v1/users/u1/inbox" + query, key: key})
	var p inboxPageJSON
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&p) != nil {
		t.Fatalf("GET inbox%s: status %d", query, resp.StatusCode)
	}
	return p
}

// TestInboxListAndActions: pages newest first with a cursor, the unread
// count through read, unread, archive and read-all.
func TestInboxListAndActions(t *testing.T) {
	t.Parallel()
	b := setupInbox(t, inbox.Options{}, nil)
	key := b.addKey(t, auth.ScopeNotifyRead, auth.ScopeNotifySend)
	for i := 1; i <= 3; i++ {
		b.deliver(t, "u1", fmt.Sprint("n", i))
	}
	p := b.page(t, key, "?limit=2")
	if len(p.Items) != 2 || p.Items[0].ID != "n3" || p.Items[0].Seq != 3 || p.Items[1].ID != "n2" || p.Unread != 3 || p.NextCursor != "2" {
		t.Fatalf("first page = %+v", p)
	}
	if p := b.page(t, key, "?limit=2&cursor="+p.NextCursor); len(p.Items) != 1 || p.Items[0].ID != "n1" || p.NextCursor != "" {
		t.Fatalf("second page = %+v", p)
	}
	post := func(path string, want int) {
		t.Helper()
		if resp := b.do(call{method: "POST", path: "/v1/users/u1/inbox/" + path, key: key}); resp.StatusCode != want {
			t.Fatalf("POST %s: status %d, want %d", path, resp.StatusCode, want)
		}
	}
	post("n1/read", 200)
	post("n2/archive", 200)
	if p := b.page(t, key, ""); len(p.Items) != 2 || p.Unread != 1 || !p.Items[1].Read {
		t.Errorf("after read n1, archive n2: %+v, want n3 and n1 (read), 1 unread", p)
	}
	if p := b.page(t, key, "?archived=true"); len(p.Items) != 1 || p.Items[0].ID != "n2" {
		t.Errorf("archive = %+v, want n2", p)
	}
	post("n1/unread", 200)
	if p := b.page(t, key, ""); p.Unread != 2 {
		t.Errorf("unread after marking n1 unread = %d, want 2", p.Unread)
	}
	post("read-all", 200)
	if p := b.page(t, key, ""); p.Unread != 0 {
		t.Errorf("unread after read-all = %d, want 0", p.Unread)
	}
	post("nope/read", 404)
	for _, q := range []string{"?limit=0", "?limit=201", "?cursor=x", "?archived=maybe"} {
		if resp := b.do(call{method: "GET", path: "/v1/users/u1/inbox" + q, key: key}); resp.StatusCode != 400 {
			t.Errorf("GET inbox%s: status %d, want 400", q, resp.StatusCode)
		} else {
			decodeProblem(t, resp)
		}
	}
}

// readEvent is one event read from a stream.
type readEvent = ssetest.Event

// sseReader reads events from a stream, heartbeats as event ":".
type sseReader struct {
	resp   *http.Response
	events <-chan readEvent
}

func openStream(t *testing.T, url string, header http.Header) *sseReader {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &sseReader{resp: resp}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 {
		return r
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q, want text/event-stream", ct)
	}
	r.events = ssetest.Read(resp.Body, 100)
	return r
}

// next returns the next event of kind event (others are skipped), failing
// after 5s.
func (r *sseReader) next(t *testing.T, event string) readEvent {
	t.Helper()
	return ssetest.Next(t, r.events, event, 5*time.Second)
}

// TestInboxStream: a stream gets new messages and unread counts as they
// happen and heartbeats past the server's write timeout; a reconnect with
// Last-Event-ID replays what it missed; streams per user are bounded; and
// closing the inbox (shutdown) ends the streams.
func TestInboxStream(t *testing.T) {
	t.Parallel()
	b := setupInbox(t, inbox.Options{MaxStreamsPerUser: 1}, nil)
	sender := b.addKey(t, auth.ScopeNotifySend)
	tok := b.token(t, sender, "u1", "")
	ts := httptest.NewUnstartedServer(b.srv)
	ts.Config.WriteTimeout = 300 * time.Millisecond
	ts.Start()
	t.Cleanup(ts.Close)
	url := ts.URL + "/v1/users/u1/inbox/stream?token=" + tok

	b.deliver(t, "u1", "n1")
	s := openStream(t, url, nil)
	if e := s.next(t, "unread"); e.Data != `{"unread":1}` {
		t.Errorf("first event = %+v, want the unread count 1", e)
	}
	if busy := openStream(t, url, nil); busy.resp.StatusCode != 429 {
		t.Errorf("a second stream for u1: status %d, want 429", busy.resp.StatusCode)
	}
	b.deliver(t, "u1", "n2")
	e := s.next(t, "message")
	var got struct {
		Message struct{ ID string }
		Unread  int
	}
	if err := json.Unmarshal([]byte(e.Data), &got); err != nil || e.ID != "2" || got.Message.ID != "n2" || got.Unread != 2 {
		t.Fatalf("message event = %+v (%v), want id 2, n2, unread 2", e, err)
	}
	if _, _, err := b.inbox.Mark(t.Context(), "u1", "n1", inbox.Read); err != nil {
		t.Fatal(err)
	}
	if e := s.next(t, "unread"); e.Data != `{"unread":1}` {
		t.Errorf("after reading n1: %+v, want unread 1", e)
	}
	// Heartbeats keep coming after the write timeout has passed.
	start := time.Now()
	for time.Since(start) < 2*ts.Config.WriteTimeout {
		s.next(t, ":")
	}
	b.deliver(t, "u1", "n3")
	if e := s.next(t, "message"); e.ID != "3" {
		t.Errorf("a message after the write timeout: %+v, want id 3", e)
	}

	// Shutdown ends the stream.
	b.inbox.Close()
	for range s.events { // drains, then the channel closes: the body ended
	}
	if _, err := b.inbox.Subscribe("u1", ""); err != inbox.ErrClosed {
		t.Errorf("Subscribe after Close = %v, want ErrClosed", err)
	}
}

// TestInboxStreamResume: Last-Event-ID (header or query) replays exactly
// the messages after it, then goes live.
func TestInboxStreamResume(t *testing.T) {
	t.Parallel()
	b := setupInbox(t, inbox.Options{}, nil)
	reader := b.addKey(t, auth.ScopeNotifyRead)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	for i := 1; i <= 4; i++ {
		b.deliver(t, "u1", fmt.Sprint("n", i))
	}
	h := http.Header{"Authorization": {"Bearer " + reader}, "Last-Event-Id": {"2"}}
	s := openStream(t, ts.URL+"/v1/users/u1/inbox/stream", h)
	if e := s.next(t, "message"); e.ID != "3" {
		t.Errorf("first replayed = %+v, want id 3", e)
	}
	if e := s.next(t, "message"); e.ID != "4" {
		t.Errorf("second replayed = %+v, want id 4", e)
	}
	if e := s.next(t, "unread"); e.Data != `{"unread":4}` {
		t.Errorf("after the replay: %+v, want unread 4", e)
	}
	b.deliver(t, "u1", "n5")
	if e := s.next(t, "message"); e.ID != "5" {
		t.Errorf("live after the replay: %+v, want id 5", e)
	}
	q := openStream(t, ts.URL+"/v1/users/u1/inbox/stream?last_event_id=4", http.Header{"Authorization": {"Bearer " + reader}})
	if e := q.next(t, "message"); e.ID != "5" {
		t.Errorf("resumed from the query: %+v, want id 5", e)
	}
	bad := openStream(t, ts.URL+"/v1/users/u1/inbox/stream?last_event_id=x", http.Header{"Authorization": {"Bearer " + reader}})
	if bad.resp.StatusCode != 400 {
		t.Errorf("a bad Last-Event-ID: status %d, want 400", bad.resp.StatusCode)
	}
}

// TestInboxStreamOutOfOrder: a message published before the one numbered
// just below it (two workers) still reaches the stream, in seq order.
func TestInboxStreamOutOfOrder(t *testing.T) {
	t.Parallel()
	var held []inbox.Event
	var svc *inbox.Service
	hold := true
	b := setupInbox(t, inbox.Options{Publish: func(e inbox.Event) error {
		if hold && e.Kind == inbox.KindMessage && e.Message.Seq == 2 {
			held = append(held, e) // published late
			return nil
		}
		svc.Receive(e)
		return nil
	}}, nil)
	svc = b.inbox
	reader := b.addKey(t, auth.ScopeNotifyRead)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	b.deliver(t, "u1", "n1")
	s := openStream(t, ts.URL+"/v1/users/u1/inbox/stream?last_event_id=0", http.Header{"Authorization": {"Bearer " + reader}})
	if e := s.next(t, "message"); e.ID != "1" {
		t.Fatalf("replayed %+v, want id 1", e)
	}
	b.deliver(t, "u1", "n2") // held back
	b.deliver(t, "u1", "n3")
	for _, want := range []string{"2", "3"} {
		if e := s.next(t, "message"); e.ID != want {
			t.Errorf("got %+v, want id %s", e, want)
		}
	}
	hold = false
	for _, e := range held {
		svc.Receive(e) // the late copy is dropped as sent
	}
	b.deliver(t, "u1", "n4")
	if e := s.next(t, "message"); e.ID != "4" {
		t.Errorf("after the late copy: %+v, want id 4", e)
	}
}
