package workflow

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Service is the workflow engine: it keeps definitions, takes in events,
// and advances runs. Its methods are safe for concurrent use.
type Service struct {
	opts Options
}

// New returns a Service using o; zero fields take their defaults.
func New(o Options) *Service { return &Service{opts: o} }

// Workflow is a parsed, validated definition with its version.
type Workflow struct {
	Key       string
	Version   int
	Trigger   Trigger
	Entry     Entry
	Steps     []Step
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Trigger names the event that starts a workflow's runs.
type Trigger struct {
	Event string `json:"event"`
}

// Entry bounds who enters a workflow: OncePer skips an event for a user
// who entered within it (zero: none).
type Entry struct {
	OncePer time.Duration
}

// BatchResult is one event's answer in IngestBatch: Error set when that
// event was refused.
type BatchResult struct {
	Accepted
	Error *apperr.Error
}

// RunView is a run as the API shows it.
type RunView struct {
	Run Run
}

var errNotYet = apperr.New(apperr.Unavailable, "not yet")

// PutWorkflow saves a new version of key's definition.
func (s *Service) PutWorkflow(ctx context.Context, key string, body json.RawMessage) (Workflow, bool, error) {
	return Workflow{}, false, errNotYet
}

// Workflow returns the current version of key.
func (s *Service) Workflow(ctx context.Context, key string) (Workflow, error) {
	return Workflow{}, errNotYet
}

// Workflows lists every workflow's current version, by key.
func (s *Service) Workflows(ctx context.Context) ([]Workflow, error) { return nil, errNotYet }

// DeleteWorkflow deletes key and cancels its live runs.
func (s *Service) DeleteWorkflow(ctx context.Context, key string) (int, error) { return 0, errNotYet }

// Ingest takes in one event.
func (s *Service) Ingest(ctx context.Context, e EventRequest) (Accepted, error) {
	return Accepted{}, errNotYet
}

// IngestBatch takes in up to 1,000 events, answering each in order.
func (s *Service) IngestBatch(ctx context.Context, es []EventRequest) ([]BatchResult, error) {
	return nil, errNotYet
}

// Run returns one run.
func (s *Service) Run(ctx context.Context, id string) (RunView, error) { return RunView{}, errNotYet }

// Runs lists runs matching f, newest first.
func (s *Service) Runs(ctx context.Context, f RunFilter, cursor string, limit int) ([]RunView, string, error) {
	return nil, "", errNotYet
}

// Cancel cancels workflow's live runs of userID, or the run runID.
func (s *Service) Cancel(ctx context.Context, workflow, userID, runID string) ([]string, error) {
	return nil, errNotYet
}

// RunScheduler claims due runs every Tick and advances them until ctx ends.
func (s *Service) RunScheduler(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
