package queue

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/notify"
)

// task is a fetched job and its message.
type task struct {
	job  notify.Job
	msg  jetstream.Msg
	part int    // the partition (consumer) it came from
	id   uint64 // the runner's handle in held
}

// keyedRunner runs tasks on a fixed pool of worker goroutines, with at most
// one task in flight per user, in arrival order per user. dispatch never
// blocks: the fetch loop takes every message the server sends at once, so
// none waits unseen in the client's buffer while its ack deadline runs; the
// consumer's MaxAckPending bounds how many a node holds.
//
// Every task the runner holds, waiting for a worker, waiting behind the
// same user's earlier task or running, is kept alive with an in-progress
// acknowledgement every keepAlive, so JetStream does not hand it to
// another node while this one is alive, however long it waits.
//
// The workers live as long as the runner, so their stacks, grown once by
// the deep store and provider calls, are not grown again for every job.
type keyedRunner struct {
	mu     sync.Mutex
	cond   *sync.Cond
	busy   map[string][]task // users in flight (or ready) -> tasks waiting behind them
	ready  []task            // users' next tasks, for any idle worker, in arrival order
	held   map[uint64]jetstream.Msg
	parts  map[int]int // partition -> tasks of it held
	seq    uint64
	closed bool

	stop <-chan struct{} // shutting down: tasks not started are handed back
	run  func(task)
	// gate, if set, puts critical jobs first: a critical lane's runner
	// counts its tasks in it, another lane's runner waits at it before
	// starting a task (see priorityGate).
	gate     *priorityGate
	critical bool
	workers  sync.WaitGroup
	alive    sync.WaitGroup // the keep-alive loop
	done     chan struct{}  // ends the keep-alive loop
}

func newKeyedRunner(workers int, keepAlive time.Duration, stop <-chan struct{}, gate *priorityGate, critical bool, run func(task)) *keyedRunner {
	r := &keyedRunner{busy: map[string][]task{}, held: map[uint64]jetstream.Msg{}, parts: map[int]int{}, stop: stop, run: run,
		gate: gate, critical: critical, done: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	for range workers {
		r.workers.Go(r.work)
	}
	r.alive.Go(func() { r.keepAlive(keepAlive) })
	return r
}

// dispatch queues t behind its user's task in flight, or for the next idle
// worker.
func (r *keyedRunner) dispatch(t task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	t.id = r.seq
	r.held[t.id] = t.msg
	r.parts[t.part]++
	if r.gate != nil && r.critical {
		r.gate.hold(1)
	}
	if waiting, ok := r.busy[t.job.UserID]; ok {
		r.busy[t.job.UserID] = append(waiting, t)
		return
	}
	r.busy[t.job.UserID] = nil
	r.ready = append(r.ready, t)
	r.cond.Signal()
}

// work runs a task, then that user's tasks that queued behind it, then
// waits for another user's.
func (r *keyedRunner) work() {
	for {
		r.mu.Lock()
		for len(r.ready) == 0 && !r.closed {
			r.cond.Wait()
		}
		if len(r.ready) == 0 {
			r.mu.Unlock()
			return
		}
		t := r.ready[0]
		r.ready[0] = task{}
		r.ready = r.ready[1:]
		r.mu.Unlock()
		for {
			select {
			case <-r.stop: // shutting down: hand the job back at once
				_ = t.msg.Nak()
			default:
				r.runGated(t)
			}
			if r.gate != nil && r.critical {
				r.gate.hold(-1)
			}
			key := t.job.UserID
			r.mu.Lock()
			delete(r.held, t.id)
			if r.parts[t.part]--; r.parts[t.part] == 0 {
				delete(r.parts, t.part)
			}
			waiting := r.busy[key]
			if len(waiting) == 0 {
				delete(r.busy, key)
				r.mu.Unlock()
				break
			}
			t, r.busy[key] = waiting[0], waiting[1:]
			r.mu.Unlock()
		}
	}
}

// runGated runs t, first waiting at the gate unless t is critical.
func (r *keyedRunner) runGated(t task) {
	if r.gate != nil && !r.critical {
		release := r.gate.enter(r.stop)
		defer release()
		select {
		case <-r.stop: // shut down while waiting: hand the job back
			_ = t.msg.Nak()
			return
		default:
		}
	}
	r.run(t)
}

// keepAlive sends an in-progress acknowledgement for every held message
// each interval, until close.
func (r *keyedRunner) keepAlive(interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var msgs []jetstream.Msg
	for {
		select {
		case <-r.done:
			return
		case <-tick.C:
		}
		msgs = r.heldMsgs(msgs[:0])
		for _, m := range msgs {
			// A message acknowledged meanwhile answers an error without
			// sending anything; one that fails to send is retried at the
			// next tick, well before its deadline.
			_ = m.InProgress()
		}
		clear(msgs)
	}
}

// heldMsgs appends every held message to buf.
func (r *keyedRunner) heldMsgs(buf []jetstream.Msg) []jetstream.Msg {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.held {
		buf = append(buf, m)
	}
	return buf
}

// holdingPart returns how many messages of partition part the runner
// holds: waiting, queued behind their user's task or running.
func (r *keyedRunner) holdingPart(part int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parts[part]
}

// close waits for the tasks in flight and those queued behind them (handed
// back when stop is closed), then stops the workers and the keep-alive,
// which runs until the last worker is done. Call it after the last
// dispatch.
func (r *keyedRunner) close() {
	r.mu.Lock()
	r.closed = true
	r.cond.Broadcast()
	r.mu.Unlock()
	r.workers.Wait()
	close(r.done)
	r.alive.Wait()
}
