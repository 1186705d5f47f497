package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LinkRequest asks for a short link. URL is required; the rest is
// optional.
type LinkRequest struct {
	URL  string `json:"url"`
	Slug string `json:"slug,omitempty"`
	// Domain is a custom domain the caller registered (CreateDomain): the
	// link answers only on that host, and its slug is unique there.
	Domain    string     `json:"domain,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// MaxVisits is how many human visits the link lets through (1: a
	// one-time link); later visits answer 410 or go to the fallback URL.
	// 0: no limit.
	MaxVisits int64 `json:"max_visits,omitempty"`
	// FallbackURL is where the link redirects once expired or used up,
	// instead of the server's links.fallback_url or 410.
	FallbackURL string `json:"fallback_url,omitempty"`
	// ClickIDs makes each human redirect append a signed click id
	// (sluice_cid) to the target, for RecordConversion.
	ClickIDs bool `json:"click_ids,omitempty"`
}

// Link is a short link with its statistics.
type Link struct {
	Code string `json:"code"`
	// Domain is the link's custom domain; empty for none.
	Domain    string     `json:"domain,omitempty"`
	ShortURL  string     `json:"short_url"`
	URL       string     `json:"url"`
	ExpiresAt *time.Time `json:"expires_at"`
	CreatedAt time.Time  `json:"created_at"`
	// Clicks counts human clicks, BotHits previews, scanners, crawlers and
	// HEAD requests; both as of the server's last flush (about a second).
	Clicks         int64      `json:"clicks"`
	BotHits        int64      `json:"bot_hits"`
	FirstClickAt   *time.Time `json:"first_click_at"`
	NotificationID string     `json:"notification_id,omitempty"`
	// MaxVisits is nil for a link without a visit limit; Visits counts
	// the visits a limited link has let through.
	MaxVisits   *int64 `json:"max_visits"`
	Visits      int64  `json:"visits"`
	FallbackURL string `json:"fallback_url,omitempty"`
	ClickIDs    bool   `json:"click_ids"`
	// Conversions counts the conversions recorded against the link's
	// click ids.
	Conversions int64 `json:"conversions"`
	// Rules are the link's redirect rules; nil when it has none.
	Rules []LinkRule `json:"rules,omitempty"`
}

// LinkPage is one page of Links; NextCursor is empty after the last.
type LinkPage struct {
	Items      []Link `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// Shorten creates a short link (POST /v1/links). Refused input comes back
// as *Error with status 400, 409 or 422 and the field named in Errors.
func (c *Client) Shorten(ctx context.Context, req LinkRequest) (Link, error) {
	var l Link
	err := c.Do(ctx, http.MethodPost, "/v1/links", req, &l)
	return l, err
}

// Link returns the link with code and its statistics (GET /v1/links/{code}).
func (c *Client) Link(ctx context.Context, code string) (Link, error) {
	return c.DomainLink(ctx, "", code)
}

// DomainLink returns the link with code on a custom domain ("" for a
// link without one).
func (c *Client) DomainLink(ctx context.Context, domain, code string) (Link, error) {
	var l Link
	err := c.Do(ctx, http.MethodGet, linkPath(domain, code, ""), nil, &l)
	return l, err
}

// DeleteLink deletes the link with code (DELETE /v1/links/{code}).
func (c *Client) DeleteLink(ctx context.Context, code string) error {
	return c.DeleteDomainLink(ctx, "", code)
}

// DeleteDomainLink deletes the link with code on a custom domain ("" for
// a link without one).
func (c *Client) DeleteDomainLink(ctx context.Context, domain, code string) error {
	return c.Do(ctx, http.MethodDelete, linkPath(domain, code, ""), nil, nil)
}

// linkPath is /v1/links/{code}, then sub ("/rules"), with ?domain= for a
// link on a custom domain.
func linkPath(domain, code, sub string) string {
	p := "/v1/links/" + url.PathEscape(code) + sub
	if domain != "" {
		p += "?domain=" + url.QueryEscape(domain)
	}
	return p
}

// Links returns a page of the caller's links, newest first: limit per page
// (0: the server's default of 50), starting at cursor ("" for the first).
func (c *Client) Links(ctx context.Context, limit int, cursor string) (LinkPage, error) {
	return c.links(ctx, nil, limit, cursor)
}

// DomainLinks is Links, only those on a custom domain ("": only those
// without one).
func (c *Client) DomainLinks(ctx context.Context, domain string, limit int, cursor string) (LinkPage, error) {
	return c.links(ctx, &domain, limit, cursor)
}

func (c *Client) links(ctx context.Context, domain *string, limit int, cursor string) (LinkPage, error) {
	q := url.Values{}
	if domain != nil {
		q.Set("domain", *domain)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/v1/links"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var p LinkPage
	err := c.Do(ctx, http.MethodGet, path, nil, &p)
	return p, err
}
