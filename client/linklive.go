package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// LinkHit is one recorded hit of a link, as its live stats stream sends
// it: a human click, or a bot hit (Bot, with BotReason). Dimensions the
// server could not tell are empty.
type LinkHit struct {
	// ID is the event's id: pass it to LinkHits to resume after it.
	ID        string    `json:"-"`
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

// LinkHitStream reads one open live stats stream. It is not safe for
// concurrent use; Close it when done.
type LinkHitStream struct {
	body io.ReadCloser
	sc   *bufio.Scanner
	// LastEventID is the id of the last hit Next returned (or the one the
	// stream was opened after): reopen with it after an error.
	LastEventID string
}

// maxEventLine bounds one line of a stream (an event's data is far less).
const maxEventLine = 64 << 10

// LinkHits opens the live stats stream of the link with code (GET
// /v1/links/{code}/stats/stream): each hit the server records from now
// on, or, with lastEventID (a LinkHit.ID), first the hits after it the
// server still keeps. The stream lasts until ctx ends, Close is called or
// the server ends it (Next then returns an error: reopen with
// LastEventID). A refusal (401, 404, 429 with RetryAfter) is an *Error.
// The request does not use HTTPClient's Timeout: ctx bounds it.
func (c *Client) LinkHits(ctx context.Context, code, lastEventID string) (*LinkHitStream, error) {
	return c.DomainLinkHits(ctx, "", code, lastEventID)
}

// DomainLinkHits is LinkHits for the link with code on a custom domain
// ("": a link without one).
func (c *Client) DomainLinkHits(ctx context.Context, domain, code, lastEventID string) (*LinkHitStream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+linkPath(domain, code, "/stats/stream"), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := &http.Client{}
	if c.HTTPClient != nil {
		hc = &http.Client{Transport: c.HTTPClient.Transport, Jar: c.HTTPClient.Jar}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, decodeError(resp, raw)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("live stats of %s: the server answered %q, not an event stream", code, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxEventLine)
	return &LinkHitStream{body: resp.Body, sc: sc, LastEventID: lastEventID}, nil
}

// Next returns the next hit, skipping heartbeats; it returns io.EOF when
// the server ended the stream, another error when it broke.
func (s *LinkHitStream) Next() (LinkHit, error) {
	for {
		e, err := readEvent(s.sc)
		if err != nil {
			return LinkHit{}, err
		}
		if e.event != "hit" {
			continue
		}
		var h LinkHit
		if err := json.Unmarshal([]byte(e.data), &h); err != nil {
			return LinkHit{}, fmt.Errorf("live stats: event %s: %w", e.id, err)
		}
		h.ID = e.id
		if e.id != "" {
			s.LastEventID = e.id
		}
		return h, nil
	}
}

// Close ends the stream.
func (s *LinkHitStream) Close() error { return s.body.Close() }

// event is one Server-Sent Event: its id, name and data (lines joined
// with "\n").
type event struct{ id, event, data string }

// readEvent reads lines up to the next event (comments and events without
// data are skipped, as the format says); io.EOF at the end of the stream.
func readEvent(sc *bufio.Scanner) (event, error) {
	var e event
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != nil {
				e.data = strings.Join(data, "\n")
				return e, nil
			}
			e = event{}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			if !strings.ContainsRune(value, 0) {
				e.id = value
			}
		case "event":
			e.event = value
		case "data":
			data = append(data, value)
		}
	}
	if err := sc.Err(); err != nil {
		return event{}, err
	}
	return event{}, io.EOF
}
