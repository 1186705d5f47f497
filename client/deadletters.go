package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// DeadLetter is a delivery that failed permanently or ran out of attempts
// (critical and orders notifications).
type DeadLetter struct {
	ID             string    `json:"id"`
	NotificationID string    `json:"notification_id"`
	Channel        string    `json:"channel"`
	UserID         string    `json:"user_id"`
	Error          string    `json:"error"`
	Attempts       int       `json:"attempts"`
	CreatedAt      time.Time `json:"created_at"`
	// ReplayedAt is when it was sent again; zero while not replayed.
	ReplayedAt time.Time `json:"replayed_at,omitzero"`
}

// DeadLetterPage is one page of dead letters, newest first; NextCursor is
// empty after the last.
type DeadLetterPage struct {
	Items      []DeadLetter `json:"items"`
	NextCursor string       `json:"next_cursor"`
}

// DeadLetters returns a page of dead letters (GET /v1/dead-letters): limit
// per page (0: the server's default of 50), from cursor ("" for the first).
func (c *Client) DeadLetters(ctx context.Context, cursor string, limit int) (DeadLetterPage, error) {
	var p DeadLetterPage
	err := c.Do(ctx, http.MethodGet, "/v1/dead-letters"+pageQuery(cursor, limit), nil, &p)
	return p, err
}

// Replay is the answer to ReplayDeadLetter: the delivery, queued again.
type Replay struct {
	ID             string `json:"id"`
	NotificationID string `json:"notification_id"`
	Channel        string `json:"channel"`
	Status         string `json:"status"`
}

// ReplayDeadLetter sends a dead letter's delivery again (POST
// /v1/dead-letters/{id}/replay). An unknown id is *Error 404, one replayed
// already 409.
func (c *Client) ReplayDeadLetter(ctx context.Context, id string) (Replay, error) {
	var r Replay
	err := c.Do(ctx, http.MethodPost, "/v1/dead-letters/"+url.PathEscape(id)+"/replay", nil, &r)
	return r, err
}
