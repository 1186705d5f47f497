package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// DomainRequest registers a custom short domain. Domain is required.
type DomainRequest struct {
	// Domain is a host name such as go.example.com (Unicode names are
	// stored in their punycode form), without scheme, port or path.
	Domain string `json:"domain"`
	// FallbackURL is where an unknown code on the domain redirects;
	// empty: 404.
	FallbackURL string `json:"fallback_url,omitempty"`
}

// Domain is a registered custom domain, or the caller's claim of one.
type Domain struct {
	Domain      string    `json:"domain"`
	FallbackURL string    `json:"fallback_url"`
	CreatedAt   time.Time `json:"created_at"`
	// Verified says the domain serves redirects. While it is false (the
	// server has links.domains.verify dns), publish VerificationToken in
	// a TXT record named VerificationRecord (_sluice.<domain>) and call
	// VerifyDomain.
	Verified           bool       `json:"verified"`
	VerifiedAt         *time.Time `json:"verified_at"`
	VerificationRecord string     `json:"verification_record"`
	VerificationToken  string     `json:"verification_token"`
	// VerificationError is, from VerifyDomain, why the domain is still
	// not verified.
	VerificationError string `json:"verification_error,omitempty"`
}

// CreateDomain registers a custom domain (POST /v1/domains). A domain
// already registered (verified) by any key is *Error 409; an invalid name,
// or a host the server answers on itself, 422; past the server's caps,
// 429. With links.domains.verify dns the domain comes back unverified:
// see Domain.Verified.
func (c *Client) CreateDomain(ctx context.Context, req DomainRequest) (Domain, error) {
	var d Domain
	err := c.Do(ctx, http.MethodPost, "/v1/domains", req, &d)
	return d, err
}

// Domains returns the caller's domains (every one for an admin key), by
// name (GET /v1/domains).
func (c *Client) Domains(ctx context.Context) ([]Domain, error) {
	var page struct {
		Items []Domain `json:"items"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/domains", nil, &page)
	return page.Items, err
}

// DeleteDomain removes a domain the caller registered (DELETE
// /v1/domains/{domain}); while links are on it, *Error 409.
func (c *Client) DeleteDomain(ctx context.Context, domain string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/domains/"+url.PathEscape(domain), nil, nil)
}

// Domain returns one domain the caller registered (GET
// /v1/domains/{domain}); another caller's is *Error 404.
func (c *Client) Domain(ctx context.Context, domain string) (Domain, error) {
	var d Domain
	err := c.Do(ctx, http.MethodGet, "/v1/domains/"+url.PathEscape(domain), nil, &d)
	return d, err
}

// UpdateDomain sets the fallback URL of a domain the caller registered
// (PATCH /v1/domains/{domain}); "" clears it, so an unknown code there is
// a 404.
func (c *Client) UpdateDomain(ctx context.Context, domain, fallbackURL string) (Domain, error) {
	var d Domain
	body := struct {
		FallbackURL string `json:"fallback_url"`
	}{fallbackURL}
	err := c.Do(ctx, http.MethodPatch, "/v1/domains/"+url.PathEscape(domain), body, &d)
	return d, err
}

// VerifyDomain asks the server to look the domain's TXT record up now
// (POST /v1/domains/{domain}/verify) and returns the domain: Verified
// once the record holds its token, else VerificationError says why.
// Another key's claim verified first is *Error 409.
func (c *Client) VerifyDomain(ctx context.Context, domain string) (Domain, error) {
	var d Domain
	err := c.Do(ctx, http.MethodPost, "/v1/domains/"+url.PathEscape(domain)+"/verify", nil, &d)
	return d, err
}
