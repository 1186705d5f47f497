package config

import "time"

// Workflows configures the workflow engine: each node's scheduler and the
// caps on what clients store (docs/notifications.md, "Workflows").
type Workflows struct {
	Tick               time.Duration `yaml:"tick" flag:"workflow-tick" usage:"how often each node's workflow scheduler claims the runs that are due (a wait ended, a wait_for's deadline passed); a run an event resumes goes on at once"`
	Lease              time.Duration `yaml:"lease" flag:"workflow-lease" usage:"how long a node's claim on a run keeps the other nodes off it; runs held by a node that died are due again after it"`
	Batch              int           `yaml:"batch" flag:"workflow-batch" usage:"runs one node's workflow scheduler claims at most per tick"`
	MaxLiveRunsPerUser int           `yaml:"max_live_runs_per_user" flag:"workflow-max-live-runs-per-user" usage:"runs one user may have running or waiting, over every workflow; an event that would start more starts none for that user"`
	MaxWorkflows       int           `yaml:"max_workflows" flag:"workflow-max-workflows" usage:"workflows that may be stored; a new one past it is refused with 429"`
	MaxLiveRuns        int           `yaml:"max_live_runs" flag:"workflow-max-live-runs" usage:"runs running or waiting in the store, every node's together (about 1.1 KB each); an event that would start more is refused with 429 (counted every 15s, plus the runs each node started since)"`
	MaxAttributeUsers  int           `yaml:"max_attribute_users" flag:"workflow-max-attribute-users" usage:"users whose attributes may be stored (PUT /v1/users/{id}/attributes, at most 16 KiB each); a new user's past it are refused with 429, a PUT of {} deletes a user's"`
	Retention          time.Duration `yaml:"retention" flag:"workflow-retention" usage:"how long events and the runs that ended are kept (longer for runs while a workflow's entry.once_per is longer); live runs are never deleted; 0 keeps them as long as notification history (notify-retention)"`
}

func defaultWorkflows() Workflows {
	return Workflows{Tick: 200 * time.Millisecond, Lease: 30 * time.Second, Batch: 500, MaxLiveRunsPerUser: 100, MaxWorkflows: 1000,
		MaxLiveRuns: 10_000_000, MaxAttributeUsers: 10_000_000}
}

// validate reports the workflow settings' problems through bad.
func (c Workflows) validate(bad func(flag, format string, args ...any)) {
	if c.Tick < 10*time.Millisecond || c.Tick > time.Minute {
		bad("workflow-tick", "must be from 10ms to 1m")
	}
	if c.Lease < time.Second || c.Lease > time.Hour {
		bad("workflow-lease", "must be from 1s to 1h")
	} else if c.Lease <= c.Tick {
		bad("workflow-lease", "must be longer than workflow-tick")
	}
	if c.Batch < 1 || c.Batch > 10_000 {
		bad("workflow-batch", "must be from 1 to 10000")
	}
	if c.MaxLiveRunsPerUser < 1 {
		bad("workflow-max-live-runs-per-user", "must be at least 1")
	}
	if c.MaxWorkflows < 1 {
		bad("workflow-max-workflows", "must be at least 1")
	}
	if c.MaxLiveRuns < c.MaxLiveRunsPerUser {
		bad("workflow-max-live-runs", "must be at least workflow-max-live-runs-per-user")
	}
	if c.MaxAttributeUsers < 1 {
		bad("workflow-max-attribute-users", "must be at least 1")
	}
	if c.Retention != 0 && c.Retention < time.Hour {
		bad("workflow-retention", "must be 0 (as notify-retention) or at least 1h")
	}
}
