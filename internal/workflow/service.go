package workflow

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/panics"
)

// Sender sends a send step's notification; *notify.Service is the one
// implementation. The request's RequestID is "wf:<run id>:<step index>",
// so a step run again after a crash sends nothing twice.
type Sender interface {
	Send(ctx context.Context, req notify.Request) (notify.Accepted, error)
}

// Templates says which notification types exist, so a send step of an
// unknown type is refused when the workflow is saved;
// *notify.Service implements it (NotFound for an unknown type).
type Templates interface {
	Template(ctx context.Context, typ string) (notify.Template, error)
}

// Profiles reads what a run needs of its user: the time zone of a
// `wait: {until_local}` (from the user's settings) and the attributes a
// branch reads as `user.<name>` (a JSON object; empty when none).
type Profiles interface {
	Settings(ctx context.Context, user string) (notify.Settings, error)
	UserAttributes(ctx context.Context, user string) (json.RawMessage, error)
}

// Metrics are the hooks the service reports through (internal/metrics
// binds them to sluice_workflow_* series); nil fields are skipped.
type Metrics struct {
	// RunEnded counts a run reaching a final status (and RunStarted, a
	// run started).
	RunStarted func(workflow string)
	RunEnded   func(workflow string, status Status)
	// StepEnded counts a step's end: outcome is its StepRecord status.
	StepEnded func(workflow, step, kind, status string)
	// Resumed observes how late a run resumed after its event or its
	// deadline.
	Resumed func(workflow string, by string, late time.Duration) // by: "event" or "deadline"
}

// Options configure a Service. Zero fields take the defaults named.
type Options struct {
	Store     Store
	Sender    Sender
	Templates Templates
	Profiles  Profiles
	Metrics   Metrics
	Logger    *slog.Logger
	Now       func() time.Time // default time.Now
	// Rand returns a number in [0, 1) for split steps; default
	// math/rand/v2's Float64.
	Rand func() float64
	// Tick is how often RunScheduler claims due runs; default 200ms.
	Tick time.Duration
	// Lease is how long a claim keeps other nodes off a run; a node that
	// dies holding one leaves the run due again after it. Default 30s.
	Lease time.Duration
	// Batch bounds the runs claimed per tick; default 500.
	Batch int
	// MaxLiveRunsPerUser caps a user's live runs (over every workflow): an
	// event that would start more starts none for that user, counted as
	// skipped. Default 100.
	MaxLiveRunsPerUser int
	// MaxWorkflows caps the workflows stored; default 1,000.
	MaxWorkflows int
	// MaxLiveRuns caps the live runs in the store, every node's together:
	// an event that would start runs past it is refused (TooMany, naming
	// notify.workflows.max_live_runs). It is checked against a count read
	// every CountEvery plus the runs this node started and ended since,
	// never a count per event. Default 10,000,000.
	MaxLiveRuns int
	// Retention is how long events and the runs that ended are kept
	// (Purge); live runs are never deleted. Default 90 days.
	Retention time.Duration
	// Attributes keeps the users' attributes PutUserAttributes writes; nil
	// leaves them unavailable.
	Attributes AttributeStore
	// MaxAttributeUsers caps the users with attributes stored: a user new
	// to them past it is refused (TooMany, naming
	// notify.workflows.max_attribute_users); one with attributes stored
	// may always replace them. Default 10,000,000.
	MaxAttributeUsers int
	// CountEvery is how often RunScheduler counts the live runs and the
	// users with attributes, for the two caps above and RunCounts; default
	// 15s. PurgeEvery is how often it runs Purge; default 1h.
	CountEvery time.Duration
	PurgeEvery time.Duration
	// Panics reports a panic while a run advances (the "workflow"
	// surface): the run fails at its step and the scheduler goes on. If
	// nil, the panic is logged to Logger and counted nowhere.
	Panics *panics.Reporter
}

// EventRequest is one event to take in (POST /v1/events).
type EventRequest struct {
	RequestID string          `json:"request_id,omitempty"`
	Name      string          `json:"name"`
	UserID    string          `json:"user_id"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// Accepted answers an event: the runs it started and resumed.
// Duplicate reports a repeated request_id answered with the first answer.
type Accepted struct {
	EventID     string   `json:"event_id"`
	RunsStarted []string `json:"runs_started"`
	RunsResumed []string `json:"runs_resumed"`
	Duplicate   bool     `json:"-"`
}
