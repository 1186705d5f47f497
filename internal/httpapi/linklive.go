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
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/linklive"
)

// LinkLive is what the live link stats stream needs: *linklive.Hub.
type LinkLive interface {
	Subscribe(linkID int64, caller string) (*linklive.Subscription, error)
	Replay(ctx context.Context, linkID int64, after uint64, limit int) ([]linklive.Hit, error)
	Sent(n int)
}

// linkReplayMax bounds the hits one (re)connection replays.
const linkReplayMax = 1000

func (s *Server) registerLinkLive() {
	s.Handle("GET /v1/links/{code}/stats/stream", auth.ScopeLinksWrite, s.linkLiveStream)
}

// linkHitJSON is the data of a "hit" event.
type linkHitJSON struct {
	Code      string    `json:"code"`
	At        time.Time `json:"at"`
	Bot       bool      `json:"bot"`
	BotReason string    `json:"bot_reason"`
	Source    string    `json:"source"`
	Country   string    `json:"country"`
	Device    string    `json:"device"`
	OS        string    `json:"os"`
	Referrer  string    `json:"referrer"`
	Language  string    `json:"language"`
	Target    string    `json:"target"`
}

func linkHitEvent(code string, h linklive.Hit) []byte {
	data, _ := json.Marshal(linkHitJSON{Code: code, At: h.At.UTC(), Bot: h.Bot, BotReason: h.BotReason, Source: h.Source,
		Country: h.Country, Device: h.Device, OS: h.OS, Referrer: h.Referrer, Language: h.Language, Target: h.Target})
	return sseEvent(int64(h.ID), "hit", data)
}

// parseLastEventID reads a stream's resume point: the id of the last
// event the client has (Last-Event-ID, or ?last_event_id= for clients
// that cannot set headers); 0 when it sent none.
func parseLastEventID(r *http.Request) (uint64, error) {
	v := cmp.Or(r.Header.Get("Last-Event-ID"), r.URL.Query().Get("last_event_id"))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 63)
	if err != nil {
		return 0, fieldErrors(apperr.Invalid, "Last-Event-ID", "must be the id of an event of this stream")
	}
	return n, nil
}

// linkLiveStream serves a link's hits as Server-Sent Events: "hit"
// events (id: the hit's id, growing) and comment heartbeats. A client that
// reconnects with Last-Event-ID first gets the hits it missed that the
// feed still keeps. The stream ends when the client goes, when it falls
// too far behind (it reconnects and resumes), when the server shuts down,
// and at the first heartbeat after the key or session that opened it
// stopped admitting it or the link was deleted.
func (s *Server) linkLiveStream(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	feed := s.opts.LinkLive
	if feed == nil {
		return apperr.New(apperr.Unavailable, "live link stats are not configured on this server")
	}
	last, err := parseLastEventID(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	code := r.PathValue("code")
	l, err := s.opts.Links.Get(ctx, linkCaller(r), linkKey(r)) // ?domain= names a custom domain's link
	if err != nil {
		return err
	}
	sub, err := feed.Subscribe(l.ID, linkCaller(r).ID)
	if err != nil {
		capped := errors.Is(err, linklive.ErrStreams) || errors.Is(err, linklive.ErrCallerStreams)
		return subscribeFailed(w, r, err, capped, errors.Is(err, linklive.ErrClosed))
	}
	defer sub.Close()
	// Read before the headers go, so a feed failure is still a problem.
	var missed []linklive.Hit
	if last > 0 {
		// Bounded: a NATS that does not answer costs this, then a 503.
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		missed, err = feed.Replay(rctx, l.ID, last, linkReplayMax)
		cancel()
		if err != nil {
			return apperr.Wrap(apperr.Unavailable, err, "the hits after Last-Event-ID cannot be read now; reconnect")
		}
	}
	r = withReauth(r, func(r *http.Request) error {
		_, err := s.auth.authorize(r, auth.ScopeLinksWrite)
		return err
	})

	out := startSSE(w)
	if err := out.write([]byte("retry: " + strconv.Itoa(inboxRetryMillis) + "\n\n")); err != nil {
		return nil
	}
	for _, h := range missed {
		if h.ID > last {
			last = h.ID
			if err := out.write(linkHitEvent(code, h)); err != nil {
				return nil
			}
		}
	}
	if err := out.flush(); err != nil {
		return nil
	}
	feed.Sent(len(missed))
	// The stream ends once what opened it no longer would: its API key or
	// its session's key revoked; or once the link is gone (deleted, or
	// purged once expired).
	sent := 0 // hits written since the last flush
	sseLoop(ctx, out, cmp.Or(s.opts.LinkLiveHeartbeat, 15*time.Second), sub.C,
		func() bool { return stillAdmitted(r) && !s.linkGone(ctx, r) },
		func(h *linklive.Hit) error {
			if h.ID <= last {
				return nil // replayed already
			}
			last = h.ID
			sent++
			return out.write(linkHitEvent(code, *h))
		},
		func() { feed.Sent(sent); sent = 0 })
	return nil
}

// linkGone reports whether the caller's link of r (its code and
// ?domain=) no longer exists; a store that cannot tell keeps the stream.
func (s *Server) linkGone(ctx context.Context, r *http.Request) bool {
	_, err := s.opts.Links.Get(ctx, linkCaller(r), linkKey(r))
	return apperr.Is(err, apperr.NotFound)
}
