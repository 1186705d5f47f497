-- The retention of workflow history: runs that ended (completed, canceled,
-- failed), by when they ended, so the purge deletes those past the
-- history kept without reading the live ones. Live runs have no entry.
-- Events need no index of their own: their ids sort by the time they
-- were taken in (notify.NewID), so the purge walks the primary key.
CREATE INDEX workflow_runs_ended ON workflow_runs (updated_at) WHERE status IN ('completed', 'canceled', 'failed');
