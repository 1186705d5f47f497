package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/inbox"
)

const (
	// inboxWriteWait bounds each write to a stream: the server's write
	// timeout is lifted for the stream's life, and a client that stops
	// reading is cut off after this instead.
	inboxWriteWait = 10 * time.Second
	// inboxReplayMax bounds what one (re)connection replays from the
	// store; a client further behind pages the inbox instead.
	inboxReplayMax  = 1000
	inboxReplayPage = 100
	// inboxRetryMillis is the reconnect delay the stream suggests.
	inboxRetryMillis = 2000
)

// inboxStream serves a user's Server-Sent Events: "message" events (id:
// the message's seq) with the message and the unread count, "unread"
// events with the count alone, and comment heartbeats. A client that
// reconnects with Last-Event-ID (or ?last_event_id=) first gets the
// messages it missed, from the store. The stream ends when the client
// goes, when it falls too far behind (it reconnects and catches up), when
// the server shuts down, and at the first heartbeat after what opened it
// stopped authorising it (see stillAdmitted).
func (s *Server) inboxStream(svc Inbox, user string, w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	last := int64(-1) // the seq of the last message sent; -1: none yet
	if v := cmp.Or(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("last_event_id")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return fieldErrors(apperr.Invalid, "Last-Event-ID", "must be the id of an event of this stream")
		}
		last = n
	}
	sub, err := svc.Subscribe(user, callerOf(r).ID) // "" for an inbox token
	if err != nil {
		capped := errors.Is(err, inbox.ErrUserStreams) || errors.Is(err, inbox.ErrKeyStreams) || errors.Is(err, inbox.ErrStreams)
		return subscribeFailed(w, r, err, capped, errors.Is(err, inbox.ErrClosed))
	}
	defer sub.Close()
	// Read before the headers go, so a store failure is still a problem.
	unread, err := svc.Unread(ctx, user)
	if err != nil {
		return err
	}

	out := startSSE(w)
	feed := &inboxFeed{svc: svc, user: user, out: out, last: last}
	if err := out.send([]byte("retry: " + strconv.Itoa(inboxRetryMillis) + "\n\n")); err != nil {
		return nil // the client is gone
	}
	if last >= 0 {
		if err := feed.catchUp(ctx, unread); err != nil {
			return nil
		}
	}
	if err := out.send(sseEvent(-1, "unread", unreadData(inbox.Event{Unread: unread}))); err != nil {
		return nil
	}
	// The stream ends once what opened it no longer would: its inbox
	// token expired or revoked (as this node knows it: within the cache
	// TTL), its API key or session's key revoked.
	sseLoop(ctx, out, cmp.Or(s.opts.InboxHeartbeat, 15*time.Second), sub.C,
		func() bool { return stillAdmitted(r) },
		func(e inbox.Event) error { return feed.handle(ctx, e) }, nil)
	return nil
}

// inboxFeed turns one user's inbox events into the stream's events, after
// last (the seq of the last message sent; -1: none yet).
type inboxFeed struct {
	svc  Inbox
	user string
	out  *sseStream
	last int64
}

// message writes m (data is its event's JSON) and moves last past it.
func (f *inboxFeed) message(m inbox.Message, data []byte) error {
	f.last = max(f.last, m.Seq)
	return f.out.write(sseEvent(f.last, "message", data))
}

// catchUp writes what the store holds after last, up to the replay bound.
func (f *inboxFeed) catchUp(ctx context.Context, unread int) error {
	for sent := 0; sent < inboxReplayMax; {
		ms, err := f.svc.Since(ctx, f.user, f.last, inboxReplayPage)
		if err != nil {
			return err
		}
		for _, m := range ms {
			if err := f.message(m, messageData(m, unread)); err != nil {
				return err
			}
		}
		if len(ms) < inboxReplayPage {
			return nil
		}
		sent += len(ms)
	}
	return nil
}

// handle writes one event from the subscription (flushed by the caller).
func (f *inboxFeed) handle(ctx context.Context, e inbox.Event) error {
	switch {
	case e.Kind == inbox.KindUnread:
		return f.out.write(sseEvent(-1, "unread", e.Payload(unreadData)))
	case e.Message == nil || e.Message.Seq <= f.last:
		return nil // sent already (replayed, or a republished retry)
	case f.last < 0 || e.Message.Seq == f.last+1:
		return f.message(*e.Message, e.Payload(func(e inbox.Event) []byte { return messageData(*e.Message, e.Unread) }))
	default:
		// Messages were published out of order (two workers): the
		// store, whose seqs commit in order, has the ones between.
		return f.catchUp(ctx, e.Unread)
	}
}

func messageData(m inbox.Message, unread int) []byte {
	data, _ := json.Marshal(map[string]any{"message": toInboxJSON(m), "unread": unread})
	return data
}

func unreadData(e inbox.Event) []byte {
	data, _ := json.Marshal(map[string]int{"unread": e.Unread})
	return data
}
