package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Notification is a request to notify a user (POST /v1/notifications).
type Notification struct {
	// RequestID makes the request idempotent: send the same value on every
	// retry of one event.
	RequestID string         `json:"request_id,omitempty"`
	UserID    string         `json:"user_id"`
	Type      string         `json:"type"`
	Data      map[string]any `json:"data,omitempty"`
	ExpiresAt *time.Time     `json:"expires_at,omitempty"`
	Channels  []string       `json:"channels,omitempty"`
}

// Accepted answers Send.
type Accepted struct {
	NotificationID string `json:"notification_id"`
	Status         string `json:"status"`
	// Duplicate reports that the request_id was seen before (HTTP 200):
	// NotificationID is the first request's and nothing new was sent.
	Duplicate bool `json:"-"`
}

// Send asks the server to notify a user. It returns once the notification
// is durably saved.
func (c *Client) Send(ctx context.Context, n Notification) (Accepted, error) {
	var a Accepted
	status, _, err := c.doStatus(ctx, http.MethodPost, "/v1/notifications", n, &a)
	a.Duplicate = status == http.StatusOK
	return a, err
}

// BatchResult is one item of SendBatch's answer.
type BatchResult struct {
	NotificationID string `json:"notification_id"`
	// Status is accepted, duplicate or refused.
	Status string `json:"status"`
	// Error says why a refused item was refused.
	Error *Error `json:"error"`
}

// SendBatch sends up to 1,000 notifications in one request and returns one
// result per notification, in order.
func (c *Client) SendBatch(ctx context.Context, ns []Notification) ([]BatchResult, error) {
	var out struct {
		Results []BatchResult `json:"results"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/notifications/batch", map[string]any{"notifications": ns}, &out)
	return out.Results, err
}

// Delivery is one channel of a notification.
type Delivery struct {
	Channel       string    `json:"channel"`
	Provider      string    `json:"provider"`
	Status        string    `json:"status"`
	Attempts      int       `json:"attempts"`
	Error         string    `json:"error"`
	UpdatedAt     time.Time `json:"updated_at"`
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// ClickedAt and OpenedAt are an email's first click on a tracked link
	// and first open by a person (bot hits never set them); zero for none.
	ClickedAt time.Time `json:"clicked_at,omitzero"`
	OpenedAt  time.Time `json:"opened_at,omitzero"`
}

// NotificationRecord is a stored notification with its deliveries.
type NotificationRecord struct {
	ID         string          `json:"id"`
	RequestID  string          `json:"request_id,omitempty"`
	UserID     string          `json:"user_id"`
	Type       string          `json:"type"`
	Category   string          `json:"category"`
	Data       json.RawMessage `json:"data"`
	Channels   []string        `json:"channels,omitempty"`
	ExpiresAt  time.Time       `json:"expires_at,omitzero"`
	CreatedAt  time.Time       `json:"created_at"`
	Deliveries []Delivery      `json:"deliveries"`
}

// Notification returns a notification with its deliveries.
func (c *Client) Notification(ctx context.Context, id string) (NotificationRecord, error) {
	var r NotificationRecord
	err := c.Do(ctx, http.MethodGet, "/v1/notifications/"+url.PathEscape(id), nil, &r)
	return r, err
}

// UserNotifications returns a page of a user's notifications, newest first,
// and the cursor of the next page ("" at the end).
func (c *Client) UserNotifications(ctx context.Context, user, cursor string, limit int) ([]NotificationRecord, string, error) {
	var out struct {
		Items      []NotificationRecord `json:"items"`
		NextCursor string               `json:"next_cursor"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/users/"+url.PathEscape(user)+"/notifications"+pageQuery(cursor, limit), nil, &out)
	return out.Items, out.NextCursor, err
}

// Settings are a user's notification preferences and contacts.
type Settings struct {
	Channels   map[string]bool `json:"channels,omitempty"`
	Categories map[string]bool `json:"categories,omitempty"`
	Contacts   Contacts        `json:"contacts"`
	Locale     string          `json:"locale,omitempty"`
	Timezone   string          `json:"timezone,omitempty"`
	QuietHours *QuietHours     `json:"quiet_hours,omitempty"`
}

// Contacts are where a user is reached.
type Contacts struct {
	Email      string   `json:"email,omitempty"`
	Phone      string   `json:"phone,omitempty"`
	PushTokens []string `json:"push_tokens,omitempty"`
	WebhookURL string   `json:"webhook_url,omitempty"`
}

// QuietHours is a daily "HH:MM" window in the user's timezone.
type QuietHours struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// UserSettings returns a user's settings (defaults when none are stored).
func (c *Client) UserSettings(ctx context.Context, user string) (Settings, error) {
	var s Settings
	err := c.Do(ctx, http.MethodGet, "/v1/users/"+url.PathEscape(user)+"/settings", nil, &s)
	return s, err
}

// PutUserSettings replaces a user's settings and returns them as stored.
func (c *Client) PutUserSettings(ctx context.Context, user string, s Settings) (Settings, error) {
	var out Settings
	err := c.Do(ctx, http.MethodPut, "/v1/users/"+url.PathEscape(user)+"/settings", s, &out)
	return out, err
}

// OutboxEntry is a message the built-in outbox provider received.
type OutboxEntry struct {
	NotificationID string    `json:"notification_id"`
	Channel        string    `json:"channel"`
	UserID         string    `json:"user_id"`
	To             string    `json:"to"`
	Subject        string    `json:"subject"`
	Body           string    `json:"body"`
	HTML           string    `json:"html,omitempty"` // an email's HTML part
	Attempt        int       `json:"attempt"`
	CreatedAt      time.Time `json:"created_at"`
}

// Outbox returns a page of the outbox, newest first, optionally for one
// user.
func (c *Client) Outbox(ctx context.Context, user, cursor string, limit int) ([]OutboxEntry, string, error) {
	var out struct {
		Items      []OutboxEntry `json:"items"`
		NextCursor string        `json:"next_cursor"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/outbox"+pageQuery(cursor, limit, "user_id", user), nil, &out)
	return out.Items, out.NextCursor, err
}

// pageQuery builds a query string from a cursor, a limit and name, value
// pairs, leaving out empty values.
func pageQuery(cursor string, limit int, pairs ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			v.Set(pairs[i], pairs[i+1])
		}
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// CanceledNotification is a notification after CancelNotification.
type CanceledNotification struct {
	NotificationRecord
	// Outcome is canceled (every delivery not suppressed is canceled),
	// partly_canceled (some were sending or final already) or
	// not_canceled (too late, or nothing was live).
	Outcome string `json:"outcome"`
}

// CancelNotification cancels the deliveries of notification id that are
// not yet sent (DELETE /v1/notifications/{id}) and returns the
// notification after the cancel. An unknown id is *Error with status 404.
func (c *Client) CancelNotification(ctx context.Context, id string) (CanceledNotification, error) {
	var r CanceledNotification
	err := c.Do(ctx, http.MethodDelete, "/v1/notifications/"+url.PathEscape(id), nil, &r)
	return r, err
}
