// Package client is a typed Go client for Sluice's HTTP API. Errors from the
// server come back as *Error, decoded from RFC 9457 problem+json, so callers
// can test the status and read which fields were refused.
//
//	c := client.New("http://127.0.0.1:8080", os.Getenv("SLUICE_API_KEY"))
//	link, err := c.Shorten(ctx, client.LinkRequest{URL: "https://example.com"})
//
// ReadCampaignCSV and SendCampaign send one notification type to every
// user of a CSV file, as `sluice campaign send` does.
//
// The calls follow the API's groups: links (Shorten, PutLinkRules,
// LinkStats, LinkQR, RecordConversion), notifications (Send,
// CancelNotification, UserSettings), status event subscriptions
// (CreateEventSubscription and the rest), the in-app inbox (Inbox,
// MarkInboxMessage, InboxToken, RevokeInboxTokens) and workflows
// (SendEvent, PutWorkflow, GetWorkflowRun, CancelWorkflowRuns,
// PutUserAttributes and the rest). An end user's inbox
// token works as APIKey for that user's inbox calls.
//
// A Client is safe for concurrent use.
package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// DefaultServer is where a client looks when no server is named.
const DefaultServer = "http://127.0.0.1:8080"

// Client talks to one Sluice server.
type Client struct {
	// BaseURL is the server's root, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when not empty.
	APIKey string
	// HTTPClient makes the requests. If nil, a client with a 30s timeout is used.
	HTTPClient *http.Client
}

// New returns a Client for baseURL (DefaultServer when empty).
func New(baseURL, apiKey string) *Client {
	if baseURL == "" {
		baseURL = DefaultServer
	}
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), APIKey: apiKey}
}

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

// FieldError names one refused input field.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// Error is a problem+json answer from the server (or a non-JSON error body).
// Its message starts with the status, e.g. "422 Unprocessable Entity: ...".
type Error struct {
	Status    int          `json:"status"`
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Detail    string       `json:"detail"`
	RequestID string       `json:"request_id"`
	Errors    []FieldError `json:"errors"`
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Status, cmp.Or(e.Title, http.StatusText(e.Status)))
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	for _, f := range e.Errors {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Detail)
	}
	return b.String()
}

// IsStatus reports whether err is an *Error with the given HTTP status.
func IsStatus(err error, status int) bool {
	e, ok := errors.AsType[*Error](err)
	return ok && e.Status == status
}

// Do sends one request with in (if not nil) as its JSON body and decodes a
// 2xx answer into out (if not nil). Non-2xx answers return *Error. It is
// exported for endpoints this package has no typed call for yet.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	_, err := c.do(ctx, method, path, in, out)
	return err
}

// do is Do that also returns the response headers.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (http.Header, error) {
	_, h, err := c.doStatus(ctx, method, path, in, out)
	return h, err
}

// doStatus is Do that also returns the status and the response headers.
func (c *Client) doStatus(ctx context.Context, method, path string, in, out any) (int, http.Header, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	status, h, raw, err := c.roundTrip(ctx, method, path, body, "application/json")
	if err != nil {
		return status, h, err
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return status, h, fmt.Errorf("decode %s %s response: %w", method, path, err)
		}
	}
	return status, h, nil
}

// roundTrip sends one request (body, if not nil, as JSON) and returns a
// 2xx answer's status, headers and body (at most 16 MiB); other answers
// return *Error.
func (c *Client) roundTrip(ctx context.Context, method, path string, body io.Reader, accept string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = defaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return resp.StatusCode, resp.Header, nil, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, resp.Header, nil, decodeError(resp, raw)
	}
	return resp.StatusCode, resp.Header, raw, nil
}

func decodeError(resp *http.Response, raw []byte) error {
	e := &Error{Status: resp.StatusCode}
	if err := json.Unmarshal(raw, e); err != nil || e.Status == 0 {
		e.Status = resp.StatusCode
		e.Detail = strings.TrimSpace(string(raw))
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		var secs int
		if _, err := fmt.Sscanf(s, "%d", &secs); err == nil {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	return e
}
