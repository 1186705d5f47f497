package workflow

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/panics"
)

// Service is the workflow engine: it keeps definitions, takes in events
// and advances runs. Create one with New; its methods are safe for
// concurrent use, and any number of Services (one per node) may share a
// store.
type Service struct {
	opts Options
	defs *defCache
	wake chan string // run ids Ingest started or resumed, for RunScheduler
	// maxRunSteps is MaxRunSteps and maxVersions MaxVersions (tests lower
	// them).
	maxRunSteps, maxVersions int
	// live and attrUsers are the counts MaxLiveRuns and MaxAttributeUsers
	// are checked against (caps.go); runCounts, the live runs' last count
	// per workflow and status, read at runCountsAt under countMu.
	live, attrUsers tally
	countMu         sync.Mutex
	runCounts       map[string]map[Status]int64
	runCountsAt     time.Time
}

// New returns a Service using o, with o's zero fields at their defaults.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Tick = cmp.Or(o.Tick, 200*time.Millisecond)
	o.Lease = cmp.Or(o.Lease, 30*time.Second)
	o.Batch = cmp.Or(o.Batch, 500)
	o.MaxLiveRunsPerUser = cmp.Or(o.MaxLiveRunsPerUser, 100)
	o.MaxWorkflows = cmp.Or(o.MaxWorkflows, 1000)
	o.MaxLiveRuns = cmp.Or(o.MaxLiveRuns, 10_000_000)
	o.MaxAttributeUsers = cmp.Or(o.MaxAttributeUsers, 10_000_000)
	o.Retention = cmp.Or(o.Retention, 90*24*time.Hour)
	o.CountEvery = cmp.Or(o.CountEvery, 15*time.Second)
	o.PurgeEvery = cmp.Or(o.PurgeEvery, time.Hour)
	if o.Panics == nil {
		o.Panics = &panics.Reporter{Logger: o.Logger}
	}
	return &Service{opts: o, defs: newDefCache(defCacheSize), wake: make(chan string, wakeBuffer), maxRunSteps: MaxRunSteps,
		maxVersions: MaxVersions}
}

// Workflow is a parsed, validated definition with its version. Its JSON
// is the API's: {"key", "version", "trigger": {"event"}, "entry":
// {"once_per"}, "steps": [...], "created_at", "updated_at"}, each step in
// the form it was given.
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

// PutWorkflow validates body (the definition's JSON) and saves it as the
// next version of key; created reports a key new to the store. A body
// equal to the current version's saves nothing and answers that version.
// An invalid definition is Unprocessable with a field error for each
// problem ("steps[2].wait_for.timeout"); one workflow more than
// MaxWorkflows is TooMany.
func (s *Service) PutWorkflow(ctx context.Context, key string, body json.RawMessage) (w Workflow, created bool, err error) {
	w, err = parseDefinition(ctx, key, body, s.opts.Templates)
	if err != nil {
		return Workflow{}, false, err
	}
	def, err := json.Marshal(definition{w.Trigger, w.Entry, w.Steps})
	if err != nil {
		return Workflow{}, false, fmt.Errorf("encode workflow %q: %w", key, err)
	}
	cur, err := s.opts.Store.Workflow(ctx, key)
	switch {
	case err == nil:
		if old, err := s.workflowOf(cur); err == nil {
			if same, _ := json.Marshal(definition{old.Trigger, old.Entry, old.Steps}); bytes.Equal(same, def) {
				return old, false, nil
			}
		}
		if err := s.checkVersions(ctx, key); err != nil {
			return Workflow{}, false, err
		}
	case apperr.Is(err, apperr.NotFound):
		created = true
		all, err := s.opts.Store.Workflows(ctx)
		if err != nil {
			return Workflow{}, false, err
		}
		if len(all) >= s.opts.MaxWorkflows {
			return Workflow{}, false, apperr.New(apperr.TooMany, "%d workflows are stored, the bound (notify.workflows.max_workflows, %d); delete one first",
				len(all), s.opts.MaxWorkflows)
		}
	default:
		return Workflow{}, false, err
	}
	saved, err := s.opts.Store.PutWorkflow(ctx, Stored{Key: key, Trigger: w.Trigger.Event, Definition: def}, s.opts.Now())
	if err != nil {
		return Workflow{}, false, err
	}
	w.Version, w.CreatedAt, w.UpdatedAt = saved.Version, saved.CreatedAt, saved.UpdatedAt
	s.defs.put(w)
	return w, created, nil
}

// Workflow returns the current version of key (NotFound when none).
func (s *Service) Workflow(ctx context.Context, key string) (Workflow, error) {
	st, err := s.opts.Store.Workflow(ctx, key)
	if err != nil {
		return Workflow{}, err
	}
	return s.workflowOf(st)
}

// Workflows lists every workflow's current version, by key.
func (s *Service) Workflows(ctx context.Context) ([]Workflow, error) {
	all, err := s.opts.Store.Workflows(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Workflow, 0, len(all))
	for _, st := range all {
		w, err := s.workflowOf(st)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// DeleteWorkflow deletes key and cancels its live runs, returning how
// many it canceled. The versions stay readable for the runs' history.
func (s *Service) DeleteWorkflow(ctx context.Context, key string) (canceled int, err error) {
	n, err := s.opts.Store.DeleteWorkflow(ctx, key, s.opts.Now())
	if err != nil {
		return 0, err
	}
	for range n {
		s.runEnded(key, StatusCanceled)
	}
	return n, nil
}

// version returns version of key, parsed, from the cache or the store.
func (s *Service) version(ctx context.Context, key string, version int) (Workflow, error) {
	if w, ok := s.defs.get(key, version); ok {
		return w, nil
	}
	st, err := s.opts.Store.WorkflowVersion(ctx, key, version)
	if err != nil {
		return Workflow{}, err
	}
	return s.workflowOf(st)
}

// workflowOf parses a stored version (through the cache).
func (s *Service) workflowOf(st Stored) (Workflow, error) {
	if w, ok := s.defs.get(st.Key, st.Version); ok {
		return w, nil
	}
	w, p := parse(st.Definition)
	if len(p) > 0 {
		return Workflow{}, fmt.Errorf("stored workflow %q version %d does not parse: %s: %s", st.Key, st.Version, p[0].Field, p[0].Detail)
	}
	w.Key, w.Version, w.CreatedAt, w.UpdatedAt = st.Key, st.Version, st.CreatedAt, st.UpdatedAt
	s.defs.put(w)
	return w, nil
}

// defCacheSize bounds the parsed definitions a Service keeps.
const defCacheSize = 4096

// defCache keeps parsed definitions by key and version; versions never
// change, so entries never go stale. When full, an arbitrary entry makes
// room (map order): cheap, and a miss costs one read.
type defCache struct {
	mu  sync.Mutex
	m   map[defKey]Workflow
	max int
}

type defKey struct {
	key     string
	version int
}

func newDefCache(max int) *defCache { return &defCache{m: map[defKey]Workflow{}, max: max} }

func (c *defCache) get(key string, version int) (Workflow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.m[defKey{key, version}]
	return w, ok
}

func (c *defCache) put(w Workflow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[defKey{w.Key, w.Version}] = w
}
