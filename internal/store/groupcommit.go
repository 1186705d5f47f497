package store

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Group commit: the writes waiting at a moment share one transaction. See
// the package doc, "Group commit".

// batchOp is one caller's writes.
type batchOp struct {
	ctx    context.Context
	urgent bool // served first; see pipelinedBatch
	fn     func(ctx context.Context, tx *sql.Tx) error
	pg     pgWrite // the same writes pipelined, or nil
	done   chan error
}

var opPool = sync.Pool{New: func() any { return &batchOp{done: make(chan error, 1)} }}

type groupCommitter struct {
	db       *DB
	ops      chan *batchOp
	urgent   chan *batchOp // served before ops; see pipelinedBatch
	maxBatch int
	mu       sync.RWMutex // held for reading by submitters, for writing by close
	closed   bool
	wg       sync.WaitGroup
	stats    *BatchStats
}

// BatchStats counts group commits, for metrics, tests and benchmarks.
type BatchStats struct {
	mu      sync.Mutex
	Batches int64
	Ops     int64
	Largest int
	// Pipelined counts the batches among Batches that committed in one
	// round trip (PostgreSQL; see pipeline.go).
	Pipelined int64
	// Busy is the writers' time spent running and committing transactions:
	// near the elapsed time (per writer), the store's writes are the
	// bottleneck.
	Busy time.Duration
}

func (s *BatchStats) add(n int, busy time.Duration, pipelined bool) {
	s.mu.Lock()
	s.Batches++
	if pipelined {
		s.Pipelined++
	}
	s.Ops += int64(n)
	s.Largest = max(s.Largest, n)
	s.Busy += busy
	s.mu.Unlock()
}

// Snapshot returns a copy of the counters.
func (s *BatchStats) Snapshot() (batches, ops int64, largest int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Batches, s.Ops, s.Largest
}

// PipelinedBatches returns Pipelined.
func (s *BatchStats) PipelinedBatches() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Pipelined
}

// BusyTime returns Busy.
func (s *BatchStats) BusyTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Busy
}

func newGroupCommitter(db *DB, writers, maxBatch int) *groupCommitter {
	g := &groupCommitter{db: db, ops: make(chan *batchOp, 4*maxBatch), urgent: make(chan *batchOp, maxBatch),
		maxBatch: maxBatch, stats: &BatchStats{}}
	for i := range writers {
		// With several writers (PostgreSQL), the first takes only urgent
		// writes: an OTP's write never waits for a writer busy with a
		// campaign's transaction, on a server saturated by the campaign.
		urgentOnly := writers > 1 && i == 0
		g.wg.Go(func() { g.run(urgentOnly) })
	}
	return g
}

// BatchStats returns the group commit counters.
func (db *DB) BatchStats() *BatchStats { return db.gc.stats }

// batch runs fn in a transaction shared with other callers' writes and
// returns when that transaction has committed (or failed). fn must use
// only tx, rebinding its queries with db.Rebind, and may run twice (once
// in a failed batch, once alone), so it must not keep state between runs.
func (db *DB) batch(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return db.pipelinedBatch(ctx, false, fn, nil)
}

// pipelinedBatch is batch for a write that also has a pipelined form, pg
// (see pgWrite), used on PostgreSQL when every write of the transaction has
// one. fn and pg must write the same rows and report the same results; pg
// may run and then fn, in a batch that failed; pg may be nil. Urgent
// writes (a critical notification's; see notify.Category.Urgent) go into
// the next transaction ahead of every other waiting write, and that
// transaction is kept short, so a campaign's writes never queue in front
// of an OTP's.
func (db *DB) pipelinedBatch(ctx context.Context, urgent bool, fn func(ctx context.Context, tx *sql.Tx) error, pg pgWrite) error {
	g := db.gc
	op := opPool.Get().(*batchOp)
	op.ctx, op.urgent, op.fn, op.pg = ctx, urgent, fn, pg
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return apperr.New(apperr.Unavailable, unavailableMessage)
	}
	ch := g.ops
	if urgent {
		ch = g.urgent
	}
	select {
	case ch <- op:
	case <-ctx.Done():
		g.mu.RUnlock()
		return ctx.Err()
	}
	g.mu.RUnlock()
	// The op is in the writer's hands now: wait for its result even if ctx
	// ends, so the caller never reports a failure for a write that commits.
	err := <-op.done
	op.ctx, op.urgent, op.fn, op.pg = nil, false, nil, nil
	opPool.Put(op)
	return err
}

// run commits batches until both queues are closed and drained; with
// urgentOnly, it serves the urgent queue alone.
func (g *groupCommitter) run(urgentOnly bool) {
	batch := make([]*batchOp, 0, g.maxBatch)
	urgent, ops := g.urgent, g.ops
	if urgentOnly {
		ops = nil
	}
	for urgent != nil || ops != nil {
		batch = batch[:0]
		urgent = fill(&batch, urgent, g.maxBatch)
		if len(batch) == 0 { // nothing urgent waits: wait for anything
			if urgent == nil && ops == nil {
				return // both closed (urgent just now): a select on two nil channels never returns
			}
			select {
			case op, ok := <-urgent:
				if !ok {
					urgent = nil
					continue
				}
				batch = append(batch, op)
				urgent = fill(&batch, urgent, g.maxBatch)
			case op, ok := <-ops:
				if !ok {
					ops = nil
					continue
				}
				batch = append(batch, op)
			}
		}
		limit := g.maxBatch
		urgentBatch := batch[0].urgent
		if urgentBatch {
			// Urgent writes ride in a short transaction: at most an
			// eighth of a full batch of other writes joins them.
			limit = max(len(batch), g.maxBatch/8)
		}
		ops = fill(&batch, ops, limit)
		if !urgentBatch && len(batch) < limit {
			// Let the goroutines that are ready to write queue their
			// writes before this transaction starts: one yield, not a
			// timer. Under load it makes batches several times larger
			// (17 to 93 writes on average in the notification benchmark),
			// so each commit's fsync and page writes serve more requests.
			runtime.Gosched()
			ops = fill(&batch, ops, limit)
		}
		g.commit(batch)
	}
}

// fill adds the ops waiting in ch to batch, up to limit, without blocking.
// It returns ch, or nil once ch is closed and drained.
func fill(batch *[]*batchOp, ch chan *batchOp, limit int) chan *batchOp {
	for ch != nil && len(*batch) < limit {
		select {
		case op, ok := <-ch:
			if !ok {
				return nil
			}
			*batch = append(*batch, op)
		default:
			return ch
		}
	}
	return ch
}

// commit runs batch in one transaction, or each op alone if that fails.
func (g *groupCommitter) commit(batch []*batchOp) {
	live := batch[:0:0]
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.done <- err // never started: nothing was written
			continue
		}
		live = append(live, op)
	}
	if len(live) == 0 {
		return
	}
	start := time.Now()
	ctx := context.Background()
	if g.db.dialect != DialectSQLite {
		// A network database can hang; bound the transaction. On SQLite
		// nothing can hang but waiting for another process's lock, which
		// busy_timeout bounds, and a context that can end costs a
		// goroutine per statement in the driver (and one per transaction
		// in database/sql): under load, hundreds of them at a time.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	if g.pipelined(live) {
		err := g.commitPipelined(ctx, live)
		if err == nil || errors.Is(err, errOutcomeUnknown) || isTimeout(err) {
			g.stats.add(len(live), time.Since(start), true)
			for _, op := range live {
				op.done <- err
			}
			return
		}
		// Nothing was written (a timeout, above, fails every op: see
		// below). Run each op alone, as below. A lone op
		// runs again too, so that its caller gets the error of its
		// database/sql form, as on SQLite.
		g.commitEach(ctx, live)
		return
	}
	err := g.db.InTx(ctx, func(tx *sql.Tx) error {
		for _, op := range live {
			if err := op.fn(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	})
	// A batch the server cancelled past its statement timeout fails every
	// caller with that error (nothing was written): the database is not
	// answering in time, and running each op alone would hold the writer
	// for up to one timeout per op.
	if err == nil || len(live) == 1 || isTimeout(err) {
		g.stats.add(len(live), time.Since(start), false)
		for _, op := range live {
			op.done <- err
		}
		return
	}
	g.commitEach(ctx, live)
}

// commitEach runs each op in a transaction of its own, after the batch's
// transaction failed. An op whose transaction PostgreSQL rolls back for a
// conflict with another writer's (a deadlock: writers' batches may lock one
// user's rows in different orders) runs again, up to conflictTries times.
func (g *groupCommitter) commitEach(ctx context.Context, ops []*batchOp) {
	for _, op := range ops {
		start := time.Now()
		var err error
		for try := 1; ; try++ {
			err = g.db.InTx(ctx, func(tx *sql.Tx) error { return op.fn(ctx, tx) })
			if !isConflict(err) || try == conflictTries || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Duration(try) * conflictPause) // the other writer commits meanwhile
		}
		g.stats.add(1, time.Since(start), false)
		op.done <- err
	}
}

// conflictTries and conflictPause bound commitEach's runs of one op that
// keeps conflicting: 3 runs, 10 ms and 20 ms apart.
const (
	conflictTries = 3
	conflictPause = 10 * time.Millisecond
)

// close stops accepting writes, lets the writers finish what is queued and
// waits for them.
func (g *groupCommitter) close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	close(g.ops)
	close(g.urgent)
	g.mu.Unlock()
	g.wg.Wait()
}

// errNoRows reports sql.ErrNoRows.
func errNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// stmt is a write query, prepared once on SQLite's single write
// connection: a reused statement saves parsing the SQL on every write (a
// fifth of the writer's CPU under load). On PostgreSQL it is only the text
// (pgx already caches prepared statements per connection).
type stmt struct {
	q  string
	st *sql.Stmt // nil on PostgreSQL
}

// writeStmt returns q (already rebound) as a stmt. Call it outside a
// transaction: preparing takes the write connection, which on SQLite a
// running transaction holds.
func (db *DB) writeStmt(ctx context.Context, q string) (stmt, error) {
	if db.dialect != DialectSQLite {
		return stmt{q: q}, nil
	}
	if st, ok := db.stmts.Load(q); ok {
		return stmt{q: q, st: st.(*sql.Stmt)}, nil
	}
	prepared, err := db.write.PrepareContext(ctx, q)
	if err != nil {
		return stmt{}, mapErr(err, "prepare statement")
	}
	st, loaded := db.stmts.LoadOrStore(q, prepared)
	if loaded {
		prepared.Close()
	}
	return stmt{q: q, st: st.(*sql.Stmt)}, nil
}

// exec runs s in tx.
func (s stmt) exec(ctx context.Context, tx *sql.Tx, args ...any) (sql.Result, error) {
	if s.st == nil {
		return tx.ExecContext(ctx, s.q, args...)
	}
	return tx.StmtContext(ctx, s.st).ExecContext(ctx, args...)
}

// query runs s, a query of any number of rows, in tx.
func (s stmt) query(ctx context.Context, tx *sql.Tx, args ...any) (*sql.Rows, error) {
	if s.st == nil {
		return tx.QueryContext(ctx, s.q, args...)
	}
	return tx.StmtContext(ctx, s.st).QueryContext(ctx, args...)
}

// queryRow runs s, a query of one row, in tx.
func (s stmt) queryRow(ctx context.Context, tx *sql.Tx, args ...any) *sql.Row {
	if s.st == nil {
		return tx.QueryRowContext(ctx, s.q, args...)
	}
	return tx.StmtContext(ctx, s.st).QueryRowContext(ctx, args...)
}
