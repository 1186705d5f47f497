package client

import (
	"context"
	"net/http"
)

// LinkRule is one redirect rule of a link: conditions (If; nil always
// matches) and a target, either URL or a weighted Split, not both.
type LinkRule struct {
	// Name labels the rule in clicks and errors; empty: rules[i].
	Name  string          `json:"name,omitempty"`
	If    *LinkConditions `json:"if,omitempty"`
	URL   string          `json:"url,omitempty"`
	Split []SplitArm      `json:"split,omitempty"`
}

// LinkConditions must all hold for a rule to match; a list holds when one
// of its values does. docs/links.md lists the values.
type LinkConditions struct {
	Device   []string `json:"device,omitempty"`
	OS       []string `json:"os,omitempty"`
	Language []string `json:"language,omitempty"`
	Country  []string `json:"country,omitempty"`
	City     []string `json:"city,omitempty"`
	// Query maps a query parameter of the short URL to the value it must
	// have ("*": present with any value).
	Query map[string]string `json:"query,omitempty"`
}

// SplitArm is one arm of an A/B split: a visitor goes to it with
// probability Weight / total, the same arm on every visit.
type SplitArm struct {
	Name   string `json:"name,omitempty"`
	URL    string `json:"url"`
	Weight int    `json:"weight"`
}

// PutLinkRules replaces the redirect rules of the link with code (PUT
// /v1/links/{code}/rules) and returns the link with them; no rules removes
// them. Invalid rules come back as *Error with status 422, the rule and
// field named in Errors ("rules[3].if.country").
func (c *Client) PutLinkRules(ctx context.Context, code string, rules []LinkRule) (Link, error) {
	return c.PutDomainLinkRules(ctx, "", code, rules)
}

// PutDomainLinkRules is PutLinkRules for the link with code on a custom
// domain ("" for a link without one).
func (c *Client) PutDomainLinkRules(ctx context.Context, domain, code string, rules []LinkRule) (Link, error) {
	if rules == nil {
		rules = []LinkRule{}
	}
	var l Link
	err := c.Do(ctx, http.MethodPut, linkPath(domain, code, "/rules"), map[string]any{"rules": rules}, &l)
	return l, err
}
