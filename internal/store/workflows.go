package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/workflow"
)

var _ workflow.Store = (*DB)(nil)

// workflowColumns is what every read of a current or past version selects
// from workflow_versions v, in scanWorkflow's order.
const workflowColumns = `v.key, v.version, v.trigger, v.definition, v.created_at, v.updated_at`

// PutWorkflow implements workflow.Store. One upsert of the key's row
// numbers the version (concurrent puts of one key queue on that row, so
// each gets its own number); a key deleted before comes back with the next
// number, keeping its old versions apart, and a new CreatedAt.
func (db *DB) PutWorkflow(ctx context.Context, w workflow.Stored, now time.Time) (workflow.Stored, error) {
	at := now.UnixMicro()
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		var created int64
		err := tx.QueryRowContext(ctx, db.Rebind(`INSERT INTO workflows (key, version, trigger, deleted, created_at, updated_at)
			VALUES (?, 1, ?, 0, ?, ?)
			ON CONFLICT (key) DO UPDATE SET version = workflows.version + 1, trigger = excluded.trigger, deleted = 0,
				created_at = CASE WHEN workflows.deleted = 1 THEN excluded.created_at ELSE workflows.created_at END,
				updated_at = excluded.updated_at
			RETURNING version, created_at`), w.Key, w.Trigger, at, at).Scan(&w.Version, &created)
		if err != nil {
			return err
		}
		w.CreatedAt, w.UpdatedAt = fromMicros(&created), fromMicros(&at)
		_, err = tx.ExecContext(ctx, db.Rebind(`INSERT INTO workflow_versions (key, version, trigger, definition, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?)`), w.Key, w.Version, w.Trigger, string(w.Definition), created, at)
		return err
	})
	if err != nil {
		return workflow.Stored{}, mapErr(err, "put workflow")
	}
	return w, nil
}

// Workflow implements workflow.Store.
func (db *DB) Workflow(ctx context.Context, key string) (workflow.Stored, error) {
	w, err := scanWorkflow(db.queryRow(ctx, `SELECT `+workflowColumns+` FROM workflows w
		JOIN workflow_versions v ON v.key = w.key AND v.version = w.version WHERE w.key = ? AND w.deleted = 0`, key))
	return w, workflowErr(err, key, "get workflow")
}

// WorkflowVersion implements workflow.Store.
func (db *DB) WorkflowVersion(ctx context.Context, key string, version int) (workflow.Stored, error) {
	w, err := scanWorkflow(db.queryRow(ctx, `SELECT `+workflowColumns+` FROM workflow_versions v
		WHERE v.key = ? AND v.version = ?`, key, version))
	if errNoRows(err) {
		return w, apperr.New(apperr.NotFound, "workflow %q has no version %d", key, version)
	}
	return w, mapErr(err, "get workflow version")
}

// Workflows implements workflow.Store.
func (db *DB) Workflows(ctx context.Context) ([]workflow.Stored, error) {
	return db.workflows(ctx, "list workflows", `SELECT `+workflowColumns+` FROM workflows w
		JOIN workflow_versions v ON v.key = w.key AND v.version = w.version WHERE w.deleted = 0 ORDER BY w.key`)
}

// WorkflowsTriggeredBy implements workflow.Store, through the index of
// live workflows by trigger: the lookup every event makes.
func (db *DB) WorkflowsTriggeredBy(ctx context.Context, event string) ([]workflow.Stored, error) {
	return db.workflows(ctx, "list workflows by trigger", `SELECT `+workflowColumns+` FROM workflows w
		JOIN workflow_versions v ON v.key = w.key AND v.version = w.version
		WHERE w.trigger = ? AND w.deleted = 0 ORDER BY w.key`, event)
}

func (db *DB) workflows(ctx context.Context, op, q string, args ...any) ([]workflow.Stored, error) {
	rows, err := db.query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err, op)
	}
	defer rows.Close()
	out := []workflow.Stored{}
	for rows.Next() {
		w, err := scanWorkflow(rows)
		if err != nil {
			return nil, mapErr(err, op)
		}
		out = append(out, w)
	}
	return out, mapErr(rows.Err(), op)
}

// DeleteWorkflow implements workflow.Store. The key's row is marked
// deleted under its row lock, which RecordEvent takes (shared) before it
// starts a run of the key: an event either started its runs before the
// delete (and they are canceled here) or starts none. The live runs are
// then canceled cancelChunk at a time, each chunk a transaction of its
// own, so a workflow with a million waiting runs never holds the (SQLite:
// only) writer for long. Calling it again on a deleted key cancels the
// runs an interrupted call left live, NotFound once there are none.
func (db *DB) DeleteWorkflow(ctx context.Context, key string, now time.Time) (int, error) {
	var (
		version     int
		wasDeleted  bool
		lockCurrent = `SELECT version, deleted FROM workflows WHERE key = ?` + db.forUpdate()
	)
	err := db.InTx(ctx, func(tx *sql.Tx) error {
		var deleted int
		if err := tx.QueryRowContext(ctx, db.Rebind(lockCurrent), key).Scan(&version, &deleted); err != nil {
			return err
		}
		if wasDeleted = deleted == 1; wasDeleted {
			return nil
		}
		_, err := tx.ExecContext(ctx, db.Rebind(`UPDATE workflows SET deleted = 1, updated_at = ? WHERE key = ?`), now.UnixMicro(), key)
		return err
	})
	if err != nil {
		return 0, workflowErr(err, key, "delete workflow")
	}
	total := 0
	for {
		ids, err := db.cancelRuns(ctx, runScope{workflow: key, maxVersion: version, limit: cancelChunk}, now)
		if err != nil {
			return total, err
		}
		total += len(ids)
		if len(ids) < cancelChunk {
			break
		}
	}
	if wasDeleted && total == 0 {
		return 0, apperr.New(apperr.NotFound, "workflow %q not found", key)
	}
	return total, nil
}

// cancelChunk is how many runs one transaction of DeleteWorkflow cancels.
const cancelChunk = 500

// forUpdate is the row lock clause of a read in a transaction that will
// write the rows: PostgreSQL's FOR UPDATE; nothing on SQLite, whose
// transactions hold the one write lock from their start.
func (db *DB) forUpdate() string {
	if db.dialect == DialectPostgres {
		return ` FOR UPDATE`
	}
	return ``
}

func workflowErr(err error, key, op string) error {
	if errNoRows(err) {
		return apperr.New(apperr.NotFound, "workflow %q not found", key)
	}
	return mapErr(err, op)
}

func scanWorkflow(row interface{ Scan(...any) error }) (workflow.Stored, error) {
	var (
		w                workflow.Stored
		def              string
		created, updated int64
	)
	if err := row.Scan(&w.Key, &w.Version, &w.Trigger, &def, &created, &updated); err != nil {
		return workflow.Stored{}, err
	}
	w.Definition, w.CreatedAt, w.UpdatedAt = json.RawMessage(def), fromMicros(&created), fromMicros(&updated)
	return w, nil
}
