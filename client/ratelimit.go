package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// CheckRequest is one check: Cost (1 when zero) of Key under Policy.
type CheckRequest struct {
	Policy string `json:"policy"`
	Key    string `json:"key"`
	Cost   int64  `json:"cost,omitempty"`
}

// Decision is the answer to a check. A refusal is a Decision with Allowed
// false, not an error.
type Decision struct {
	Allowed      bool   `json:"allowed"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	WouldRefuse  bool   `json:"would_refuse,omitempty"`
	DecidedBy    string `json:"decided_by,omitempty"`
	Policy       string `json:"policy,omitempty"`
	Key          string `json:"key,omitempty"`
}

// RetryAfter is RetryAfterMS as a duration.
func (d Decision) RetryAfter() time.Duration { return time.Duration(d.RetryAfterMS) * time.Millisecond }

// CheckResult is the answer to a multi-key check: the combined decision
// and one Result per check.
type CheckResult struct {
	Decision
	Results []Decision `json:"results,omitempty"`
}

// Check checks and consumes one key.
func (c *Client) Check(ctx context.Context, req CheckRequest) (Decision, error) {
	var out Decision
	err := c.Do(ctx, http.MethodPost, "/v1/ratelimit/check", req, &out)
	return out, err
}

// CheckMulti checks several keys atomically: all consume only if all allow.
func (c *Client) CheckMulti(ctx context.Context, reqs []CheckRequest) (CheckResult, error) {
	var out CheckResult
	err := c.Do(ctx, http.MethodPost, "/v1/ratelimit/check", map[string]any{"checks": reqs}, &out)
	return out, err
}

// Policy is a rate limit policy. Period is a duration string ("1m", "1d").
type Policy struct {
	Name           string `json:"name,omitempty"`
	Algorithm      string `json:"algorithm"`
	Limit          int64  `json:"limit"`
	Period         string `json:"period"`
	Burst          int64  `json:"burst,omitempty"`
	Mode           string `json:"mode,omitempty"`
	BurstOver      int64  `json:"burst_over,omitempty"`
	OnStoreFailure string `json:"on_store_failure,omitempty"`
	// Sync, SyncInterval and MaxDebt are the policy's multi-region
	// settings (docs/ratelimit.md); empty for the defaults.
	Sync         string `json:"sync,omitempty"`
	SyncInterval string `json:"sync_interval,omitempty"`
	Description  string `json:"description,omitempty"`
	MaxDebt      int64  `json:"max_debt,omitempty"`
	// Source is where the policy comes from (database or config); the
	// server sets it.
	Source string `json:"source,omitempty"`
}

// Policies lists every policy in force.
func (c *Client) Policies(ctx context.Context) ([]Policy, error) {
	var out struct {
		Items []Policy `json:"items"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/ratelimit/policies", nil, &out)
	return out.Items, err
}

// GetPolicy returns one policy.
func (c *Client) GetPolicy(ctx context.Context, name string) (Policy, error) {
	var out Policy
	err := c.Do(ctx, http.MethodGet, "/v1/ratelimit/policies/"+url.PathEscape(name), nil, &out)
	return out, err
}

// PutPolicy creates or replaces the policy named p.Name.
func (c *Client) PutPolicy(ctx context.Context, p Policy) (Policy, error) {
	var out Policy
	p.Source = ""
	err := c.Do(ctx, http.MethodPut, "/v1/ratelimit/policies/"+url.PathEscape(p.Name), p, &out)
	return out, err
}

// DeletePolicy deletes a stored policy.
func (c *Client) DeletePolicy(ctx context.Context, name string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/ratelimit/policies/"+url.PathEscape(name), nil, nil)
}

// SimRequest is one simulated request at AtMS milliseconds from 0.
type SimRequest struct {
	AtMS int64  `json:"at_ms"`
	Key  string `json:"key"`
	Cost int64  `json:"cost,omitempty"`
}

// SimResult is a simulation's outcome.
type SimResult struct {
	Decisions   []Decision `json:"decisions"`
	Allowed     int        `json:"allowed"`
	Refused     int        `json:"refused"`
	WouldRefuse int        `json:"would_refuse"`
}

// Simulate replays reqs under an inline policy (p not nil) or the named
// one, touching no live state.
func (c *Client) Simulate(ctx context.Context, p *Policy, policyName string, reqs []SimRequest) (SimResult, error) {
	body := map[string]any{"requests": reqs}
	if p != nil {
		body["policy"] = p
	} else {
		body["policy_name"] = policyName
	}
	var out SimResult
	err := c.Do(ctx, http.MethodPost, "/v1/ratelimit/simulate", body, &out)
	return out, err
}

// Block is an emergency block of a key.
type Block struct {
	Key       string    `json:"key"`
	Policy    string    `json:"policy,omitempty"`
	Domain    string    `json:"domain,omitempty"` // the Envoy domain of an entry_key=entry_value block
	Reason    string    `json:"reason"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// BlockKey blocks key (under policy, or every policy when empty) for d.
func (c *Client) BlockKey(ctx context.Context, key, policy string, d time.Duration, reason string) (Block, error) {
	var out Block
	err := c.Do(ctx, http.MethodPost, "/v1/ratelimit/blocks",
		map[string]string{"key": key, "policy": policy, "duration": d.String(), "reason": reason}, &out)
	return out, err
}

// Blocks lists the blocks in force.
func (c *Client) Blocks(ctx context.Context) ([]Block, error) {
	var out struct {
		Items []Block `json:"items"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/ratelimit/blocks", nil, &out)
	return out.Items, err
}

// Unblock lifts every block of key.
func (c *Client) Unblock(ctx context.Context, key string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/ratelimit/blocks/"+url.PathEscape(key), nil, nil)
}

// KeyState is a key's state under a policy, read without consuming.
type KeyState struct {
	Decision
	Blocked bool   `json:"blocked"`
	Block   *Block `json:"block,omitempty"`
}

// KeyState reads key's state under policy.
func (c *Client) KeyState(ctx context.Context, policy, key string) (KeyState, error) {
	var out KeyState
	err := c.Do(ctx, http.MethodGet, "/v1/ratelimit/keys/"+url.PathEscape(policy)+"/"+url.PathEscape(key), nil, &out)
	return out, err
}

// ResetKey gives key its full allowance under policy again.
func (c *Client) ResetKey(ctx context.Context, policy, key string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/ratelimit/keys/"+url.PathEscape(policy)+"/"+url.PathEscape(key), nil, nil)
}
