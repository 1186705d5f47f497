package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// InboxMessage is one message of a user's in-app inbox. ID is its
// notification's id; Seq numbers the user's messages 1, 2, 3...
type InboxMessage struct {
	ID         string          `json:"id"`
	UserID     string          `json:"user_id"`
	Seq        int64           `json:"seq"`
	Type       string          `json:"type"`
	Category   string          `json:"category"`
	Subject    string          `json:"subject"`
	Body       string          `json:"body"`
	Data       json.RawMessage `json:"data,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	Read       bool            `json:"read"`
	ReadAt     *time.Time      `json:"read_at,omitempty"`
	ArchivedAt *time.Time      `json:"archived_at,omitempty"`
}

// InboxPage is one page of an inbox, newest first; Unread counts the
// unread messages not archived, NextCursor is empty on the last page.
type InboxPage struct {
	Items      []InboxMessage `json:"items"`
	Unread     int            `json:"unread"`
	NextCursor string         `json:"next_cursor"`
}

// InboxQuery selects a page of an inbox. Every field is optional.
type InboxQuery struct {
	Cursor string
	// Limit per page, 1 to 200; 0: the server's 50.
	Limit int
	// Archived lists the archived messages instead of the others.
	Archived bool
}

// Inbox returns a page of user's inbox (GET /v1/users/{id}/inbox). It
// needs notify:read, or the user's own inbox token as the client's APIKey.
func (c *Client) Inbox(ctx context.Context, user string, q InboxQuery) (InboxPage, error) {
	v := url.Values{}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Archived {
		v.Set("archived", "true")
	}
	path := "/v1/users/" + url.PathEscape(user) + "/inbox"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var p InboxPage
	err := c.Do(ctx, http.MethodGet, path, nil, &p)
	return p, err
}

// InboxAction changes one inbox message.
type InboxAction string

// The actions of MarkInboxMessage. Archiving also marks the message read;
// reading again keeps the first read time.
const (
	InboxRead    InboxAction = "read"
	InboxUnread  InboxAction = "unread"
	InboxArchive InboxAction = "archive"
)

// MarkInboxMessage applies a to message id of user's inbox (POST
// /v1/users/{id}/inbox/{message_id}/{read,unread,archive}) and returns
// the message and the user's new unread count. An unknown message is
// *Error with status 404.
func (c *Client) MarkInboxMessage(ctx context.Context, user, id string, a InboxAction) (InboxMessage, int, error) {
	var out struct {
		Message InboxMessage `json:"message"`
		Unread  int          `json:"unread"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/users/"+url.PathEscape(user)+"/inbox/"+url.PathEscape(id)+"/"+url.PathEscape(string(a)), nil, &out)
	return out.Message, out.Unread, err
}

// ReadAllInbox marks every message of user's inbox read and returns how
// many changed and the unread count after.
func (c *Client) ReadAllInbox(ctx context.Context, user string) (changed, unread int, err error) {
	var out struct {
		Changed int `json:"changed"`
		Unread  int `json:"unread"`
	}
	err = c.Do(ctx, http.MethodPost, "/v1/users/"+url.PathEscape(user)+"/inbox/read-all", nil, &out)
	return out.Changed, out.Unread, err
}

// InboxToken is a signed token that opens one user's inbox, for the end
// user's browser, and the link to the embeddable inbox page.
type InboxToken struct {
	UserID    string    `json:"user_id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	URL       string    `json:"url"`
}

// InboxToken mints a token for user's inbox (POST
// /v1/users/{id}/inbox-token; needs notify:send), valid for ttl (1m to
// 8784h; 0: the server's 24h).
func (c *Client) InboxToken(ctx context.Context, user string, ttl time.Duration) (InboxToken, error) {
	var in any
	if ttl > 0 {
		in = map[string]string{"ttl": ttl.String()}
	}
	var t InboxToken
	err := c.Do(ctx, http.MethodPost, "/v1/users/"+url.PathEscape(user)+"/inbox-token", in, &t)
	return t, err
}

// RevokeInboxTokens revokes every inbox token of user minted so far
// (DELETE /v1/users/{id}/inbox-tokens; needs notify:send). The node
// answering refuses them at once, every other node within 10 seconds;
// tokens minted afterwards work everywhere at once.
func (c *Client) RevokeInboxTokens(ctx context.Context, user string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/users/"+url.PathEscape(user)+"/inbox-tokens", nil, nil)
}
