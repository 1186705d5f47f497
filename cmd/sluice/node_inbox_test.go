package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/inbox/ssetest"
)

// sseEvent is one event read from an inbox stream; heartbeats have
// Event ":".
type sseEvent = ssetest.Event

// inboxStream is an open GET /v1/users/{id}/inbox/stream.
type inboxStream struct {
	events <-chan sseEvent
	close  func()
}

// openInboxStream opens url with header, failing unless it answers 200.
func openInboxStream(t *testing.T, url string, header http.Header) *inboxStream {
	t.Helper()
	// A stream lasts as long as the test needs it, within a deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Transport: apiTransport}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("GET %s = %d %s, want an event stream", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &inboxStream{events: ssetest.Read(resp.Body, 1000), close: func() { cancel(); resp.Body.Close() }}
	t.Cleanup(s.close)
	return s
}

// next returns the next event named event, skipping others, within 10s.
func (s *inboxStream) next(t *testing.T, event string) sseEvent {
	t.Helper()
	return ssetest.Next(t, s.events, event, 10*time.Second)
}

type inboxEventData struct {
	Message struct {
		ID, Subject, Body, Category string
		Seq                         int64
	}
	Unread int
}

func decodeInboxEvent(t *testing.T, e sseEvent) inboxEventData {
	t.Helper()
	var d inboxEventData
	if err := json.Unmarshal([]byte(e.Data), &d); err != nil {
		t.Fatalf("event data %q: %v", e.Data, err)
	}
	return d
}

func inboxToken(t *testing.T, base, user string) string {
	t.Helper()
	code, raw := call(t, "POST", base+"/v1/users/"+user+"/inbox-token", `{"ttl":"1h"}`)
	var tok struct{ Token string }
	if code != 200 || json.Unmarshal(raw, &tok) != nil || tok.Token == "" {
		t.Fatalf("inbox-token = %d %s", code, raw)
	}
	return tok.Token
}

// TestInboxEndToEnd: on one node (SQLite, embedded NATS), a notification
// goes through the pipeline to the inapp channel, rendered from the
// type's inapp template in the user's locale, reaches an open stream and
// the inbox; reading it moves the unread count on the stream; the user's
// settings turn the channel off like any other.
func TestInboxEndToEnd(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	base := n.httpURL
	tpl := `{"category":"orders","channels":{"default":{"en":{"subject":"Order {order}","body":"Shipped"}},` +
		`"inapp":{"en":{"subject":"Your order {order} shipped","body":"Track it in the app"},"de":{"subject":"Bestellung {order} versandt","body":"Unterwegs"}}}}`
	if code, raw := call(t, "PUT", base+"/v1/templates/parcel", tpl); code != 200 {
		t.Fatalf("PUT template = %d %s", code, raw)
	}
	if code, raw := call(t, "PUT", base+"/v1/users/anna/settings", `{"locale":"de-AT"}`); code != 200 {
		t.Fatalf("PUT settings = %d %s", code, raw)
	}
	tok := inboxToken(t, base, "anna")
	s := openInboxStream(t, base+"/v1/users/anna/inbox/stream?token="+tok, nil)
	if e := s.next(t, "unread"); e.Data != `{"unread":0}` {
		t.Errorf("first event = %+v, want unread 0", e)
	}
	code, raw := call(t, "POST", base+"/v1/notifications", `{"user_id":"anna","type":"parcel","data":{"order":"#9"}}`)
	var acc struct {
		ID string `json:"notification_id"`
	}
	if code != 202 || json.Unmarshal(raw, &acc) != nil {
		t.Fatalf("POST notification = %d %s", code, raw)
	}
	e := s.next(t, "message")
	d := decodeInboxEvent(t, e)
	if e.ID != "1" || d.Message.ID != acc.ID || d.Message.Subject != "Bestellung #9 versandt" || d.Message.Body != "Unterwegs" || d.Unread != 1 {
		t.Errorf("message event = %+v %+v, want seq 1 of %s with the German inapp text, unread 1", e, d, acc.ID)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "the inapp delivery is sent", func() error {
		got := getNotification(t, base, acc.ID)
		for _, dl := range got.Deliveries {
			if dl.Channel == "inapp" {
				return enginetest.State(dl.Status == "sent", "%s", dl.Status)
			}
		}
		return enginetest.State(false, "%s", "no inapp delivery")
	})
	code, raw = call(t, "GET", base+"/v1/users/anna/inbox?token="+tok, "")
	if code != 200 || !strings.Contains(string(raw), `"unread":1`) || !strings.Contains(string(raw), acc.ID) {
		t.Errorf("GET inbox = %d %s", code, raw)
	}
	if code, raw := call(t, "POST", base+"/v1/users/anna/inbox/"+acc.ID+"/read?token="+tok, ""); code != 200 {
		t.Errorf("read = %d %s", code, raw)
	}
	if e := s.next(t, "unread"); e.Data != `{"unread":0}` {
		t.Errorf("after reading: %+v, want unread 0", e)
	}

	if code, raw := call(t, "PUT", base+"/v1/users/anna/settings", `{"channels":{"inapp":false}}`); code != 200 {
		t.Fatalf("PUT settings = %d %s", code, raw)
	}
	_, raw = call(t, "POST", base+"/v1/notifications", `{"user_id":"anna","type":"parcel","data":{"order":"#10"}}`)
	_ = json.Unmarshal(raw, &acc)
	enginetest.EventuallyNil(t, 10*time.Second, "the second notification settles", func() error {
		got := getNotification(t, base, acc.ID)
		return enginetest.State(got.settled(), "%s", "")
	})
	for _, dl := range getNotification(t, base, acc.ID).Deliveries {
		if dl.Channel == "inapp" && (dl.Status != "suppressed" || dl.Error != "channel_off") {
			t.Errorf("inapp turned off: delivery %+v, want suppressed channel_off", dl)
		}
	}
}

// TestInboxTwoNodes: two nodes on one PostgreSQL and NATS. A stream held
// on node B gets the message accepted by node A (whichever node's worker
// stores it, the event crosses on NATS), with a token minted by A; a
// stream that reconnects to B with Last-Event-ID gets exactly what it
// missed, from the store.
func TestInboxTwoNodes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a, b := startTwoNodes(t, cfg)

	tok := inboxToken(t, a.httpURL, "bo")
	streamURL := b.httpURL + "/v1/users/bo/inbox/stream"
	s := openInboxStream(t, streamURL+"?token="+tok, nil)
	s.next(t, "unread")
	send := func(order string) string {
		t.Helper()
		code, raw := call(t, "POST", a.httpURL+"/v1/notifications", `{"user_id":"bo","type":"order.shipped","channels":["inapp"],"data":{"order":"`+order+`"}}`)
		var acc struct {
			ID string `json:"notification_id"`
		}
		if code != 202 || json.Unmarshal(raw, &acc) != nil {
			t.Fatalf("POST notification to node A = %d %s", code, raw)
		}
		return acc.ID
	}
	first := send("#1")
	e := s.next(t, "message")
	if d := decodeInboxEvent(t, e); e.ID != "1" || d.Message.ID != first || d.Message.Subject != "Order #1 shipped" {
		t.Fatalf("node B's stream got %+v %+v, want seq 1, %s", e, d, first)
	}
	s.close()

	missed := []string{send("#2"), send("#3")}
	enginetest.EventuallyNil(t, 10*time.Second, "both missed messages are stored", func() error {
		code, raw := call(t, "GET", a.httpURL+"/v1/users/bo/inbox?token="+tok, "")
		return enginetest.State(code == 200 && strings.Contains(string(raw), `"unread":3`), "%s", string(raw))
	})
	r := openInboxStream(t, streamURL, http.Header{"Authorization": {"Bearer " + tok}, "Last-Event-Id": {"1"}})
	// Two workers (on NATS 2.9, one per node) may store #2 and #3 in
	// either order; the stream replays them in the order stored.
	var replayed []string
	for _, id := range []string{"2", "3"} {
		e := r.next(t, "message")
		if e.ID != id {
			t.Errorf("replayed %+v, want id %s", e, id)
		}
		replayed = append(replayed, decodeInboxEvent(t, e).Message.ID)
	}
	if slices.Sort(replayed); !slices.Equal(replayed, slices.Sorted(slices.Values(missed))) {
		t.Errorf("replayed %v, want the missed %v", replayed, missed)
	}
	if e := r.next(t, "unread"); e.Data != `{"unread":3}` {
		t.Errorf("after the replay: %+v, want unread 3", e)
	}
	live := send("#4")
	if d := decodeInboxEvent(t, r.next(t, "message")); d.Message.ID != live {
		t.Errorf("live after the replay: %+v, want %s", d, live)
	}
}

// TestInboxStreamEndsAtShutdown: a node shutting down ends its open
// streams at once (their clients reconnect elsewhere) instead of waiting
// out the shutdown timeout for them.
func TestInboxStreamEndsAtShutdown(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DrainDelay, cfg.ShutdownTimeout = 0, time.Minute
	r := runNode(t, cfg, slog.New(slog.DiscardHandler))
	s := openInboxStream(t, "http://"+r.HTTP+"/v1/users/u1/inbox/stream", nil)
	s.next(t, "unread")
	start := time.Now()
	// Within 20s with a stream open: its shutdown timeout is 1m.
	if err := r.stop(t, 20*time.Second); err != nil {
		t.Errorf("serve returned %v", err)
	}
	for range s.events { // the stream has ended: its channel closes
	}
	t.Logf("stopped %v after the signal with a stream open", time.Since(start).Round(time.Millisecond))
}
