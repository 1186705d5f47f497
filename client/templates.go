package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Content is one channel's text in one locale, with {placeholder} fields.
type Content struct {
	Subject string `json:"subject"`
	Body    string `json:"body"`
	// HTML is an email's HTML part; empty sends Body alone.
	HTML string `json:"html,omitempty"`
}

// Template is the message template of a notification type: per channel
// (or "default"), per locale, the text to send.
type Template struct {
	Type string `json:"type"`
	// Category is critical, orders or marketing; a shipped type keeps its
	// own, a new type needs one.
	Category string                        `json:"category,omitempty"`
	Channels map[string]map[string]Content `json:"channels"`
	// Default reports the shipped template, not replaced; the server sets
	// it, as UpdatedAt.
	Default   bool      `json:"default"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Digest, Escalation and TrackLinks are the type's rules, as in
	// docs/notifications.md; absent for none.
	Digest     json.RawMessage `json:"digest,omitempty"`
	Escalation json.RawMessage `json:"escalation,omitempty"`
	TrackLinks bool            `json:"track_links,omitempty"`
}

// TemplateSummary is one type in the list of templates: its channels and
// locales by name, not their text.
type TemplateSummary struct {
	Type     string   `json:"type"`
	Category string   `json:"category"`
	Channels []string `json:"channels"`
	Locales  []string `json:"locales"`
	// Default is true while a shipped type has no override.
	Default bool `json:"default"`
	// Shipped is a type Sluice ships a template for: DeleteTemplate resets
	// it rather than removing it.
	Shipped   bool      `json:"shipped"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Templates lists every type callers may send, shipped and custom, sorted
// by type (GET /v1/templates).
func (c *Client) Templates(ctx context.Context) ([]TemplateSummary, error) {
	var out struct {
		Items []TemplateSummary `json:"items"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/templates", nil, &out)
	return out.Items, err
}

// Template returns the template of typ: the stored one, else the shipped
// default (GET /v1/templates/{type}). An unknown type is *Error 404.
func (c *Client) Template(ctx context.Context, typ string) (Template, error) {
	var out Template
	err := c.Do(ctx, http.MethodGet, templatePath(typ), nil, &out)
	return out, err
}

// PutTemplate replaces the template of t.Type, or defines a new type (with
// a Category), and returns it as stored (PUT /v1/templates/{type}).
// Default and UpdatedAt are the server's and not sent.
func (c *Client) PutTemplate(ctx context.Context, t Template) (Template, error) {
	body := struct {
		Category   string                        `json:"category,omitempty"`
		Channels   map[string]map[string]Content `json:"channels"`
		Digest     json.RawMessage               `json:"digest,omitempty"`
		Escalation json.RawMessage               `json:"escalation,omitempty"`
		TrackLinks bool                          `json:"track_links,omitempty"`
	}{t.Category, t.Channels, t.Digest, t.Escalation, t.TrackLinks}
	var out Template
	err := c.Do(ctx, http.MethodPut, templatePath(t.Type), body, &out)
	return out, err
}

// DeleteTemplate puts a shipped type back to its shipped template, or
// removes a custom type (DELETE /v1/templates/{type}). A type with no
// stored template is *Error 404.
func (c *Client) DeleteTemplate(ctx context.Context, typ string) error {
	return c.Do(ctx, http.MethodDelete, templatePath(typ), nil, nil)
}

func templatePath(typ string) string { return "/v1/templates/" + url.PathEscape(typ) }
