package workflow

import (
	"context"
	"encoding/json"
	"time"
)

// Status is where a run stands.
type Status string

// The statuses of a run. Running and waiting runs are live: the scheduler
// advances them when their DueAt comes; the others are final.
const (
	StatusRunning   Status = "running"   // a step is to run now (DueAt: now, or the end of a claim)
	StatusWaiting   Status = "waiting"   // at a wait or wait_for step until DueAt or an event
	StatusCompleted Status = "completed" // ran off the end, or reached exit
	StatusCanceled  Status = "canceled"  // canceled by a call, or its workflow deleted
	StatusFailed    Status = "failed"    // a step failed for good (see its outcome)
)

// Live reports whether a run in status s may still advance.
func (s Status) Live() bool { return s == StatusRunning || s == StatusWaiting }

// Stored is a workflow definition as the store keeps it: the parsed form
// lives in this package (Definition); the store sees only its trigger and
// its JSON. Versions are kept while runs may use them.
type Stored struct {
	Key     string
	Version int // 1 for a new key, then the previous version plus one
	// Trigger is the event name that starts runs ("" for none).
	Trigger string
	// Definition is the JSON of the whole definition, as accepted.
	Definition json.RawMessage
	CreatedAt  time.Time // of the key's first version
	UpdatedAt  time.Time // of this version
}

// Event is one event taken in: it starts and resumes runs.
type Event struct {
	ID        string
	RequestID string // "" when the caller gave none
	Name      string
	UserID    string
	Data      json.RawMessage // a JSON object
	// Hash is a digest of the request (name, user, data) so a repeated
	// request_id with another body is told apart (409).
	Hash      string
	CreatedAt time.Time
	// The answer, filled by the store once saved: the runs the event
	// started and those it resumed.
	RunsStarted []string
	RunsResumed []string
}

// StepRecord is one step a run executed (or is executing), in the order
// they ran. A loop may run the same index more than once.
type StepRecord struct {
	Index          int       `json:"index"`
	Name           string    `json:"name,omitempty"`
	Kind           string    `json:"kind"`
	Status         string    `json:"status"` // "running", "waiting", "completed", "failed", "canceled"
	StartedAt      time.Time `json:"started_at"`
	EndedAt        time.Time `json:"ended_at,omitzero"`
	NotificationID string    `json:"notification_id,omitempty"`
	Outcome        string    `json:"outcome,omitempty"`
	// Until is when a waiting step's wait ends (its deadline), zero for
	// none; kept in the record because a claim moves the run's DueAt.
	Until time.Time `json:"until,omitzero"`
	// Attempts counts a send step's tries while it fails transiently.
	Attempts int `json:"attempts,omitempty"`
}

// Run is one user's way through one version of a workflow.
type Run struct {
	ID       string
	Workflow string
	Version  int
	UserID   string
	Status   Status
	// Data is the run's data: the starting event's, plus each awaited
	// event's under its name.
	Data json.RawMessage
	// Position is the index of the step to run next, or of the wait or
	// wait_for step the run is at while waiting.
	Position int
	// Seq is bumped by every write of the run: the token of
	// [Store.UpdateRun]'s conditional write.
	Seq int64
	// WaitEvent is the event name a waiting run's wait_for awaits ("" when
	// none); WaitMatch, the values (resolved from the run's data) the
	// event's data must hold, a JSON object.
	WaitEvent string
	WaitMatch json.RawMessage
	// DueAt is when the scheduler is to advance the run: now for a
	// running run (or the end of a node's claim on it), a wait's end or a
	// wait_for's deadline; zero for none (a final run, or a wait_for
	// without a timeout).
	DueAt time.Time
	// Steps is the run's history, oldest first.
	Steps []StepRecord
	// EventID is the event that started the run.
	EventID   string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Resume is a waiting run an event resumes: the store writes Run (its new
// position, status running, DueAt now, data with the event's) only while
// the stored run's Seq is still Seq.
type Resume struct {
	Run Run
	Seq int64
}

// RunFilter narrows a list of runs; empty fields match every run.
type RunFilter struct {
	Workflow string
	UserID   string
	Status   Status
}

// Store keeps workflows, events and runs (internal/store implements it on
// SQLite and PostgreSQL; storetest pins its behaviour). Errors are
// *apperr.Error: NotFound for a missing key or run, Conflict for a
// conditional write that lost.
type Store interface {
	// PutWorkflow saves a new version of w.Key (Version and the times
	// are assigned, CreatedAt kept from the first version) and returns it.
	PutWorkflow(ctx context.Context, w Stored, now time.Time) (Stored, error)
	// Workflow returns the current version of key.
	Workflow(ctx context.Context, key string) (Stored, error)
	// WorkflowVersion returns one version of key, deleted keys included,
	// for the runs still on it.
	WorkflowVersion(ctx context.Context, key string, version int) (Stored, error)
	// Workflows lists the current version of every workflow, by key.
	Workflows(ctx context.Context) ([]Stored, error)
	// WorkflowsTriggeredBy lists the current workflows whose trigger is
	// event.
	WorkflowsTriggeredBy(ctx context.Context, event string) ([]Stored, error)
	// DeleteWorkflow deletes key (its versions stay for WorkflowVersion)
	// and cancels its live runs, returning how many it canceled.
	DeleteWorkflow(ctx context.Context, key string, now time.Time) (int, error)

	// EventByRequestID returns the event saved with requestID.
	EventByRequestID(ctx context.Context, requestID string) (Event, error)
	// RecordEvent saves e and, in the same transaction, inserts the runs
	// in start (skipping one whose user entered its workflow within
	// oncePer[run.Workflow], measured from each run's CreatedAt) and
	// writes each of resume whose Seq still holds. It fills e's
	// RunsStarted and RunsResumed with what it did. When e.RequestID is
	// already taken it changes nothing and returns the saved event and
	// created false.
	RecordEvent(ctx context.Context, e Event, start []Run, oncePer map[string]time.Duration, resume []Resume) (saved Event, created bool, err error)

	// Run returns one run.
	Run(ctx context.Context, id string) (Run, error)
	// Runs lists runs matching f, newest first, a page at a time.
	Runs(ctx context.Context, f RunFilter, cursor string, limit int) ([]Run, string, error)
	// WaitingRuns returns userID's waiting runs whose WaitEvent is event
	// and whose deadline (DueAt) is after now or absent, at most limit.
	WaitingRuns(ctx context.Context, userID, event string, now time.Time, limit int) ([]Run, error)
	// ClaimDue takes up to limit live runs whose DueAt is at or before
	// now, oldest due first, moving each one's DueAt to now+lease (so a
	// node that dies holding it leaves it due again) and bumping its Seq;
	// it returns them as written. Concurrent callers never get the same
	// run.
	ClaimDue(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]Run, error)
	// ClaimRun is ClaimDue for one run: ok false when it is not live or
	// not due.
	ClaimRun(ctx context.Context, id string, now time.Time, lease time.Duration) (Run, bool, error)
	// UpdateRun writes r (everything but its ID, Workflow, Version,
	// UserID, EventID and CreatedAt) if the stored run's Seq is seq, and
	// returns it with Seq seq+1; Conflict when the run moved on.
	UpdateRun(ctx context.Context, r Run, seq int64) (Run, error)
	// CancelRuns cancels the live runs of workflow matching userID and
	// runID (either may be empty, not both), recording a canceled step
	// outcome, and returns their ids.
	CancelRuns(ctx context.Context, workflow, userID, runID string, now time.Time) ([]string, error)
	// CountRuns counts the live runs per workflow and status, for the
	// waiting gauge.
	CountRuns(ctx context.Context) (map[string]map[Status]int64, error)
	// CountLiveRuns counts userID's live runs (running or waiting) over
	// every workflow, for Options.MaxLiveRunsPerUser.
	CountLiveRuns(ctx context.Context, userID string) (int, error)

	// DeleteWorkflowEventsBefore deletes up to limit events taken in before t,
	// oldest first, and returns how many (Purge).
	DeleteWorkflowEventsBefore(ctx context.Context, t time.Time, limit int) (int, error)
	// DeleteEndedRunsBefore deletes up to limit runs that ended
	// (completed, canceled, failed) before t (their UpdatedAt), oldest
	// first, and returns how many; live runs are never deleted.
	DeleteEndedRunsBefore(ctx context.Context, t time.Time, limit int) (int, error)
	// DeleteUnusedWorkflowVersions deletes the versions that stopped being
	// current before t (a later one was put, or the key deleted, before t)
	// and that no live run is on, limit a transaction, and the rows of keys
	// deleted before t left without versions; it returns how many
	// versions it deleted.
	DeleteUnusedWorkflowVersions(ctx context.Context, t time.Time, limit int) (int, error)
	// CountWorkflowVersions counts the versions of key stored.
	CountWorkflowVersions(ctx context.Context, key string) (int, error)
}
