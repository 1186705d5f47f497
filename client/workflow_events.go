package client

import (
	"context"
	"net/http"
)

// Event is something a user did (POST /v1/events): it starts a run of
// every workflow whose trigger names it, and resumes the user's runs
// waiting for it.
type Event struct {
	// RequestID makes the request idempotent: send the same value on
	// every retry of one event.
	RequestID string         `json:"request_id,omitempty"`
	Name      string         `json:"name"`
	UserID    string         `json:"user_id"`
	Data      map[string]any `json:"data,omitempty"`
}

// EventAccepted answers SendEvent: the runs the event started and those
// it resumed.
type EventAccepted struct {
	EventID     string   `json:"event_id"`
	RunsStarted []string `json:"runs_started"`
	RunsResumed []string `json:"runs_resumed"`
	// Duplicate reports that the request_id was seen before (HTTP 200):
	// the answer is the first request's and nothing new happened.
	Duplicate bool `json:"-"`
}

// SendEvent takes in one event. It returns once the event, and the runs
// it started and resumed, are saved.
func (c *Client) SendEvent(ctx context.Context, e Event) (EventAccepted, error) {
	var a EventAccepted
	status, _, err := c.doStatus(ctx, http.MethodPost, "/v1/events", e, &a)
	a.Duplicate = status == http.StatusOK
	return a, err
}

// EventResult is one item of SendEvents' answer.
type EventResult struct {
	EventID     string   `json:"event_id"`
	RunsStarted []string `json:"runs_started"`
	RunsResumed []string `json:"runs_resumed"`
	// Status is accepted, duplicate or refused.
	Status string `json:"status"`
	// Error says why a refused event was refused.
	Error *Error `json:"error"`
}

// SendEvents takes in up to 1,000 events in one request and returns one
// result per event, in order (POST /v1/events/batch).
func (c *Client) SendEvents(ctx context.Context, es []Event) ([]EventResult, error) {
	var out struct {
		Results []EventResult `json:"results"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/events/batch", map[string]any{"events": es}, &out)
	return out.Results, err
}
