package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// BlockRequest is an emergency block (POST /v1/ratelimit/blocks): every
// check of Key is refused for Duration.
type BlockRequest struct {
	Key string `json:"key"`
	// Policy narrows the block to one policy; empty blocks the key under
	// every policy.
	Policy string `json:"policy,omitempty"`
	// Domain is the Envoy domain of an entry_key=entry_value Key.
	Domain string `json:"domain,omitempty"`
	// Duration is how long the block lasts, e.g. 15*time.Minute.
	Duration time.Duration `json:"-"`
	Reason   string        `json:"reason"`
}

// Block creates an emergency block and returns it.
func (c *Client) Block(ctx context.Context, req BlockRequest) (Block, error) {
	body := struct {
		BlockRequest
		Duration string `json:"duration"`
	}{req, req.Duration.String()}
	var out Block
	err := c.Do(ctx, http.MethodPost, "/v1/ratelimit/blocks", body, &out)
	return out, err
}

// UnblockRequest names the blocks DeleteBlock lifts: every block of Key,
// or with Policy (and Domain) set, only the block of that policy
// ("" for the block of every policy) or Envoy domain.
type UnblockRequest struct {
	Key            string
	Policy, Domain *string
}

// DeleteBlock lifts the blocks req names (DELETE
// /v1/ratelimit/blocks/{key}); none is *Error 404.
func (c *Client) DeleteBlock(ctx context.Context, req UnblockRequest) error {
	q := url.Values{}
	if req.Policy != nil {
		q.Set("policy", *req.Policy)
	}
	if req.Domain != nil {
		q.Set("domain", *req.Domain)
	}
	path := "/v1/ratelimit/blocks/" + url.PathEscape(req.Key)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.Do(ctx, http.MethodDelete, path, nil, nil)
}
