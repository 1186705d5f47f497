package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Subscribe subscribes up to 1,000 users to a topic and returns how many
// were new (POST /v1/topics/{key}/subscribers); users already subscribed
// are skipped.
func (c *Client) Subscribe(ctx context.Context, topic string, userIDs []string) (int, error) {
	var out struct {
		Added int `json:"added"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/topics/"+url.PathEscape(topic)+"/subscribers", map[string]any{"user_ids": userIDs}, &out)
	return out.Added, err
}

// Unsubscribe removes a user from a topic; unsubscribing a user not
// subscribed is not an error.
func (c *Client) Unsubscribe(ctx context.Context, topic, userID string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/topics/"+url.PathEscape(topic)+"/subscribers/"+url.PathEscape(userID), nil, nil)
}

// Topic is a topic and its number of subscribers.
type Topic struct {
	Key         string    `json:"key"`
	Subscribers int64     `json:"subscribers"`
	CreatedAt   time.Time `json:"created_at"`
}

// Topics lists the topics by key.
func (c *Client) Topics(ctx context.Context) ([]Topic, error) {
	var out struct {
		Items []Topic `json:"items"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/topics", nil, &out)
	return out.Items, err
}

// TopicSubscribers returns a page of a topic's subscribers in user id
// order and the cursor of the next page ("" on the last); limit 0 means
// the server's default (100).
func (c *Client) TopicSubscribers(ctx context.Context, topic, cursor string, limit int) ([]string, string, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Items      []string `json:"items"`
		NextCursor string   `json:"next_cursor"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/topics/"+url.PathEscape(topic)+"/subscribers?"+q.Encode(), nil, &out)
	return out.Items, out.NextCursor, err
}

// BroadcastRequest asks for one notification to every member of a topic
// (POST /v1/broadcasts).
type BroadcastRequest struct {
	// RequestID makes the request idempotent: send the same value on
	// every retry of one broadcast.
	RequestID string         `json:"request_id"`
	Type      string         `json:"type"`
	To        BroadcastTo    `json:"to"`
	Data      map[string]any `json:"data,omitempty"`
	Channels  []string       `json:"channels,omitempty"`
	// SendAt is when to send; zero sends now. Ignored when Local is set.
	SendAt time.Time `json:"-"`
	// Local sends at this local time in each member's timezone.
	Local *LocalTime `json:"-"`
}

// BroadcastTo is a broadcast's audience: a topic (segments are not
// available yet).
type BroadcastTo struct {
	Topic   string `json:"topic,omitempty"`
	Segment string `json:"segment,omitempty"`
}

// LocalTime is a time of day ("09:00") on a date ("2026-12-24").
type LocalTime struct {
	Local string `json:"local"`
	Date  string `json:"date"`
}

// Broadcast is a broadcast and its progress.
type Broadcast struct {
	ID        string         `json:"id"`
	RequestID string         `json:"request_id"`
	Type      string         `json:"type"`
	To        BroadcastTo    `json:"to"`
	Data      map[string]any `json:"data"`
	Channels  []string       `json:"channels"`
	SendAt    time.Time      `json:"send_at"`
	Local     *LocalTime     `json:"local,omitempty"`
	// Status is scheduled, sending, done or canceled.
	Status    string           `json:"status"`
	Targeted  int64            `json:"targeted"`
	Accepted  int64            `json:"accepted"`
	Skipped   int64            `json:"skipped"`
	Groups    []BroadcastGroup `json:"groups"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
}

// BroadcastGroup is the part of a broadcast sent at one time: one per
// timezone for a local-time send.
type BroadcastGroup struct {
	Timezone string    `json:"timezone"`
	DueAt    time.Time `json:"due_at"`
	Done     bool      `json:"done"`
}

// SendBroadcast saves a broadcast and returns its id; duplicate reports a
// request_id seen before (the first broadcast's id is returned).
func (c *Client) SendBroadcast(ctx context.Context, b BroadcastRequest) (id string, duplicate bool, err error) {
	body := map[string]any{"request_id": b.RequestID, "type": b.Type, "to": b.To}
	if b.Data != nil {
		body["data"] = b.Data
	}
	if len(b.Channels) > 0 {
		body["channels"] = b.Channels
	}
	switch {
	case b.Local != nil:
		body["send_at"] = b.Local
	case !b.SendAt.IsZero():
		body["send_at"] = b.SendAt.UTC().Format(time.RFC3339)
	}
	var out struct {
		BroadcastID string `json:"broadcast_id"`
	}
	status, _, err := c.doStatus(ctx, http.MethodPost, "/v1/broadcasts", body, &out)
	return out.BroadcastID, status == http.StatusOK, err
}

// GetBroadcast returns a broadcast and its progress.
func (c *Client) GetBroadcast(ctx context.Context, id string) (Broadcast, error) {
	var b Broadcast
	err := c.Do(ctx, http.MethodGet, "/v1/broadcasts/"+url.PathEscape(id), nil, &b)
	return b, err
}

// ListBroadcasts returns a page of broadcasts, newest first, and the
// cursor of the next page ("" on the last).
func (c *Client) ListBroadcasts(ctx context.Context, cursor string, limit int) ([]Broadcast, string, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Items      []Broadcast `json:"items"`
		NextCursor string      `json:"next_cursor"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/broadcasts?"+q.Encode(), nil, &out)
	return out.Items, out.NextCursor, err
}

// CancelBroadcast cancels what a broadcast has not sent yet and returns it.
func (c *Client) CancelBroadcast(ctx context.Context, id string) (Broadcast, error) {
	var b Broadcast
	err := c.Do(ctx, http.MethodDelete, "/v1/broadcasts/"+url.PathEscape(id), nil, &b)
	return b, err
}
