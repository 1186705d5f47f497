package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Workflow is a stored workflow definition (PUT /v1/workflows/{key}):
// what happens to a user after an event, step by step. Steps are kept as
// the JSON they were given, one object per step
// ({"send": "abandoned_cart"}, {"wait": "1h"}, {"wait_for": {...}}, ...).
type Workflow struct {
	Key       string            `json:"key,omitempty"`
	Version   int               `json:"version,omitempty"`
	Trigger   WorkflowTrigger   `json:"trigger"`
	Entry     *WorkflowEntry    `json:"entry,omitempty"`
	Steps     []json.RawMessage `json:"steps"`
	CreatedAt time.Time         `json:"created_at,omitzero"`
	UpdatedAt time.Time         `json:"updated_at,omitzero"`
}

// WorkflowTrigger names the event that starts a workflow's runs.
type WorkflowTrigger struct {
	Event string `json:"event"`
}

// WorkflowEntry bounds who enters a workflow: OncePer (a Go duration,
// "24h") skips an event for a user who entered within it.
type WorkflowEntry struct {
	OncePer string `json:"once_per,omitempty"`
}

// PutWorkflow saves definition (a JSON object: {"trigger", "entry",
// "steps"}) as key's workflow, a new key or a new version of it (needs
// admin), and returns it as stored; created reports a new key (201). A
// definition the server refuses is *Error 422 naming each bad field.
func (c *Client) PutWorkflow(ctx context.Context, key string, definition json.RawMessage) (w Workflow, created bool, err error) {
	status, _, err := c.doStatus(ctx, http.MethodPut, "/v1/workflows/"+url.PathEscape(key), definition, &w)
	return w, status == http.StatusCreated, err
}

// GetWorkflow returns key's current version.
func (c *Client) GetWorkflow(ctx context.Context, key string) (Workflow, error) {
	var w Workflow
	err := c.Do(ctx, http.MethodGet, "/v1/workflows/"+url.PathEscape(key), nil, &w)
	return w, err
}

// ListWorkflows lists every workflow's current version, by key.
func (c *Client) ListWorkflows(ctx context.Context) ([]Workflow, error) {
	var out struct {
		Items []Workflow `json:"items"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/workflows", nil, &out)
	return out.Items, err
}

// DeleteWorkflow deletes key's workflow (needs admin) and returns how many
// of its runs not yet ended it canceled.
func (c *Client) DeleteWorkflow(ctx context.Context, key string) (int, error) {
	var out struct {
		RunsCanceled int `json:"runs_canceled"`
	}
	err := c.Do(ctx, http.MethodDelete, "/v1/workflows/"+url.PathEscape(key), nil, &out)
	return out.RunsCanceled, err
}

// WorkflowRun is one user's way through a workflow.
type WorkflowRun struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
	Version  int    `json:"version"`
	UserID   string `json:"user_id"`
	// Status is running, waiting, completed, canceled or failed.
	Status string `json:"status"`
	// Data is the starting event's data, plus each awaited event's under
	// its name.
	Data  json.RawMessage `json:"data"`
	Steps []RunStep       `json:"steps"`
	// WaitingFor is the event a run at a wait_for step awaits; nil
	// otherwise.
	WaitingFor *RunWait  `json:"waiting_for,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// RunStep is one step a run executed.
type RunStep struct {
	Index int    `json:"index"`
	Name  string `json:"name,omitempty"`
	// Kind is send, wait, wait_for, branch, split or exit.
	Kind string `json:"kind"`
	// Status is running, waiting, completed, failed or canceled.
	Status         string    `json:"status"`
	StartedAt      time.Time `json:"started_at"`
	EndedAt        time.Time `json:"ended_at,omitzero"`
	NotificationID string    `json:"notification_id,omitempty"`
	Outcome        string    `json:"outcome,omitempty"`
}

// RunWait is what a waiting run awaits: Event, until Until (zero: no
// deadline).
type RunWait struct {
	Event string    `json:"event"`
	Until time.Time `json:"until,omitzero"`
}

// GetWorkflowRun returns one run.
func (c *Client) GetWorkflowRun(ctx context.Context, id string) (WorkflowRun, error) {
	var r WorkflowRun
	err := c.Do(ctx, http.MethodGet, "/v1/workflow-runs/"+url.PathEscape(id), nil, &r)
	return r, err
}

// RunQuery narrows a list of runs; empty fields match every run.
type RunQuery struct {
	Workflow string // with ListWorkflowRuns, required
	UserID   string
	Status   string // running, waiting, completed, canceled or failed
	Cursor   string
	Limit    int // 1 to 200; 0: the server's default
}

// ListWorkflowRuns returns a page of runs, newest first, and the cursor
// of the next page ("" at the end): q.Workflow's runs
// (GET /v1/workflows/{key}/runs), or with only q.UserID set, that user's
// over every workflow (GET /v1/users/{id}/workflow-runs).
func (c *Client) ListWorkflowRuns(ctx context.Context, q RunQuery) ([]WorkflowRun, string, error) {
	var path string
	switch {
	case q.Workflow != "":
		path = "/v1/workflows/" + url.PathEscape(q.Workflow) + "/runs" + pageQuery(q.Cursor, q.Limit, "user_id", q.UserID, "status", q.Status)
	default:
		path = "/v1/users/" + url.PathEscape(q.UserID) + "/workflow-runs" + pageQuery(q.Cursor, q.Limit, "status", q.Status)
	}
	var out struct {
		Items      []WorkflowRun `json:"items"`
		NextCursor string        `json:"next_cursor"`
	}
	err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out.Items, out.NextCursor, err
}

// CancelWorkflowRuns cancels workflow's runs not yet ended: userID's, or
// the run runID (one of them; the other empty), and returns the ids of
// the runs it canceled.
func (c *Client) CancelWorkflowRuns(ctx context.Context, workflow, userID, runID string) ([]string, error) {
	in := map[string]string{}
	if userID != "" {
		in["user_id"] = userID
	}
	if runID != "" {
		in["run_id"] = runID
	}
	var out struct {
		Canceled []string `json:"canceled"`
	}
	err := c.Do(ctx, http.MethodPost, "/v1/workflows/"+url.PathEscape(workflow)+"/cancel", in, &out)
	return out.Canceled, err
}

// PutUserAttributes replaces a user's attributes (a JSON object of at most
// 16 KiB, which workflow branches read as user.<name>) and returns them as
// stored.
func (c *Client) PutUserAttributes(ctx context.Context, user string, attrs map[string]any) (map[string]any, error) {
	out := map[string]any{}
	err := c.Do(ctx, http.MethodPut, "/v1/users/"+url.PathEscape(user)+"/attributes", attrs, &out)
	return out, err
}

// GetUserAttributes returns a user's attributes (empty when none are
// stored).
func (c *Client) GetUserAttributes(ctx context.Context, user string) (map[string]any, error) {
	out := map[string]any{}
	err := c.Do(ctx, http.MethodGet, "/v1/users/"+url.PathEscape(user)+"/attributes", nil, &out)
	return out, err
}
