package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// EventSubscriptionRequest subscribes a URL to status events
// (notification.accepted, delivery.sent, delivery.delivered,
// delivery.failed, delivery.dead, link.clicked), sent as Standard Webhooks
// signed with the subscription's own secret. URL and Events are required.
type EventSubscriptionRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// DisableAfter is a Go duration ("120h"): disable the subscription
	// once it has failed without a success for this long. Empty: the
	// server's default; "0s": never by time.
	DisableAfter string `json:"disable_after,omitempty"`
	// DisableAfterFailures disables it after this many consecutive failed
	// attempts; nil: the server's default, 0: never by count.
	DisableAfterFailures *int `json:"disable_after_failures,omitempty"`
}

// EventSubscription is a subscription to status events. Secret (whsec_...)
// is set only in CreateEventSubscription's answer.
type EventSubscription struct {
	ID                   string    `json:"id"`
	URL                  string    `json:"url"`
	Events               []string  `json:"events"`
	Secret               string    `json:"secret,omitempty"`
	DisableAfter         string    `json:"disable_after"`
	DisableAfterFailures int       `json:"disable_after_failures"`
	CreatedAt            time.Time `json:"created_at"`
	// Status is enabled, failing or disabled.
	Status         string     `json:"status"`
	Failures       int        `json:"failures"`
	LastError      string     `json:"last_error,omitempty"`
	FirstFailureAt *time.Time `json:"first_failure_at,omitempty"`
	LastFailureAt  *time.Time `json:"last_failure_at,omitempty"`
	LastSuccessAt  *time.Time `json:"last_success_at,omitempty"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
}

// CreateEventSubscription subscribes a URL to status events (POST
// /v1/event-subscriptions; needs admin) and returns the subscription with
// its secret, which no later call shows: keep it to verify the webhooks.
func (c *Client) CreateEventSubscription(ctx context.Context, r EventSubscriptionRequest) (EventSubscription, error) {
	var s EventSubscription
	err := c.Do(ctx, http.MethodPost, "/v1/event-subscriptions", r, &s)
	return s, err
}

// EventSubscriptions lists every event subscription, oldest first, without
// secrets (GET /v1/event-subscriptions).
func (c *Client) EventSubscriptions(ctx context.Context) ([]EventSubscription, error) {
	var out struct {
		Items []EventSubscription `json:"items"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/event-subscriptions", nil, &out)
	return out.Items, err
}

// EventSubscription returns one event subscription, without its secret.
func (c *Client) EventSubscription(ctx context.Context, id string) (EventSubscription, error) {
	var s EventSubscription
	err := c.Do(ctx, http.MethodGet, "/v1/event-subscriptions/"+url.PathEscape(id), nil, &s)
	return s, err
}

// DeleteEventSubscription deletes an event subscription; events still
// pending for it fail.
func (c *Client) DeleteEventSubscription(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/v1/event-subscriptions/"+url.PathEscape(id), nil, nil)
}

// Recovery answers RecoverEventSubscription.
type Recovery struct {
	ID string `json:"id"`
	// Queued counts the events queued to the subscription.
	Queued int `json:"queued"`
	// More reports that events remain after Until: call again with
	// since Until.
	More  bool   `json:"more"`
	Until string `json:"until"`
}

// RecoverEventSubscription enables the subscription again and resends
// the retained events it wants generated at or after since that it did
// not receive (a delivery to it failed, went dead, or was never queued
// while it was disabled); with all, every one of them, received or not
// (POST /v1/event-subscriptions/{id}/recover).
func (c *Client) RecoverEventSubscription(ctx context.Context, id string, since time.Time, all bool) (Recovery, error) {
	var r Recovery
	q := url.Values{"since": {since.UTC().Format(time.RFC3339Nano)}}
	if all {
		q.Set("all", "true")
	}
	err := c.Do(ctx, http.MethodPost, "/v1/event-subscriptions/"+url.PathEscape(id)+"/recover?"+q.Encode(), nil, &r)
	return r, err
}
