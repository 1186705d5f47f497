-- Workflows (docs/notifications.md, "Workflows"): definitions kept by
-- version, the events taken in, the runs they start and resume, and the
-- user attributes a branch reads. Runs live only here: every node's
-- scheduler claims the due ones (due_at), an event finds the runs waiting
-- for it (user_id, wait_event), and seq is the token of every conditional
-- write.

-- One row per version of a workflow, kept while runs may use it (deleting
-- a workflow keeps them).
CREATE TABLE workflow_versions (
    key        TEXT NOT NULL, -- the workflow's key
    version    INTEGER NOT NULL, -- 1, 2, ... numbered on across a delete
    trigger    TEXT NOT NULL, -- the event name that starts runs; '' for none
    definition TEXT NOT NULL, -- JSON: the whole definition as accepted
    created_at INTEGER NOT NULL, -- Unix microseconds, UTC: the key's first version
    updated_at INTEGER NOT NULL, -- Unix microseconds, UTC: this version's
    PRIMARY KEY (key, version)
) STRICT;

-- One row per key: its current version. A deleted key keeps its row
-- (deleted = 1) so its versions keep their numbers if it comes back.
CREATE TABLE workflows (
    key        TEXT PRIMARY KEY,
    version    INTEGER NOT NULL, -- the current version in workflow_versions
    trigger    TEXT NOT NULL, -- the current version's trigger, for the lookup at each event
    deleted    INTEGER NOT NULL DEFAULT 0, -- 1 once deleted
    created_at INTEGER NOT NULL, -- Unix microseconds, UTC
    updated_at INTEGER NOT NULL -- Unix microseconds, UTC: last put or delete
) STRICT;

CREATE INDEX workflows_trigger ON workflows (trigger) WHERE deleted = 0;

-- The events taken in. request_id is NULL when the caller gave none, so
-- the unique index only holds the ones given.
CREATE TABLE workflow_events (
    id           TEXT PRIMARY KEY,
    request_id   TEXT UNIQUE, -- the caller's idempotency key; NULL for none
    name         TEXT NOT NULL, -- e.g. cart.abandoned
    user_id      TEXT NOT NULL,
    data         TEXT NOT NULL, -- JSON object
    hash         TEXT NOT NULL, -- digest of name, user and data: a repeated request_id with another body is refused
    runs_started TEXT NOT NULL, -- JSON array of the run ids it started
    runs_resumed TEXT NOT NULL, -- JSON array of the run ids it resumed
    created_at   INTEGER NOT NULL -- Unix microseconds, UTC
) STRICT;

CREATE INDEX workflow_events_user ON workflow_events (user_id, name, created_at);

-- One user's way through one version of a workflow. A live run (running or
-- waiting) has due_at set when the scheduler is to advance it, NULL when
-- nothing but an event moves it (a wait_for without timeout); a final run
-- (completed, canceled, failed) always has due_at NULL, so the due index
-- holds live runs only.
CREATE TABLE workflow_runs (
    id         TEXT PRIMARY KEY, -- run_...
    workflow   TEXT NOT NULL, -- key in workflows
    version    INTEGER NOT NULL, -- its version in workflow_versions
    user_id    TEXT NOT NULL,
    status     TEXT NOT NULL, -- running, waiting, completed, canceled, failed
    data       TEXT NOT NULL, -- JSON object: the starting event's data, plus each awaited event's under its name
    position   INTEGER NOT NULL, -- index of the step to run next, or of the wait it is at
    seq        INTEGER NOT NULL, -- bumped by every write: the token of conditional writes
    wait_event TEXT NOT NULL DEFAULT '', -- the event a waiting wait_for awaits; '' for none
    wait_match TEXT NOT NULL DEFAULT '', -- JSON object the event's data must hold; '' for none
    due_at     INTEGER, -- Unix microseconds, UTC: when the scheduler advances it; NULL for none
    steps      TEXT NOT NULL, -- JSON array of the steps run, oldest first
    event_id   TEXT NOT NULL, -- the event that started it
    created_at INTEGER NOT NULL, -- Unix microseconds, UTC
    updated_at INTEGER NOT NULL -- Unix microseconds, UTC
) STRICT;

CREATE INDEX workflow_runs_due ON workflow_runs (due_at) WHERE due_at IS NOT NULL;
-- A user's live runs: those waiting for an event (the lookup every event
-- makes, with status = 'waiting') and their count (the cap of live runs
-- per user).
CREATE INDEX workflow_runs_live ON workflow_runs (user_id, wait_event) WHERE status IN ('running', 'waiting');
-- The live runs per workflow and status (the gauge), counted from this
-- index alone rather than the table.
CREATE INDEX workflow_runs_live_count ON workflow_runs (workflow, status) WHERE status IN ('running', 'waiting');
-- Listing a workflow's runs newest first.
CREATE INDEX workflow_runs_workflow ON workflow_runs (workflow, created_at, id);
-- A user's runs of a workflow: listing, cancel by user, and entry.once_per.
CREATE INDEX workflow_runs_user ON workflow_runs (user_id, workflow, created_at, id);

-- A user's attributes, read by branches as user.<name>.
CREATE TABLE user_attributes (
    user_id    TEXT PRIMARY KEY,
    attributes TEXT NOT NULL, -- JSON object
    updated_at INTEGER NOT NULL -- Unix microseconds, UTC
) STRICT;
