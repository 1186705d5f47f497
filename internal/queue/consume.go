package queue

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluicehq/sluice/internal/notify"
)

// Pull timings. Pull requests expire after pullExpiry (the client's default
// is 30 s) so that a pull the server never fills (seen in CI on NATS 2.9
// under load: a stream stalled with jobs waiting until its pull expired)
// costs seconds, not an OTP's whole budget; idle streams re-pull that
// often, which also keeps a pinned partition pinned. The server sends a
// heartbeat every pullHeartbeat while a pull waits; stalledAfter missed in
// a row and the subscription is replaced, and when that does not help
// either, the consumer is checked and, if it is stuck, made again.
const (
	pullExpiry    = 5 * time.Second
	pullHeartbeat = 2 * time.Second
	stalledAfter  = 3
	retryPause    = time.Second // between attempts to subscribe again
)

// Handler processes one job; nil means done (acknowledge), an error means
// try again later.
type Handler func(ctx context.Context, j notify.Job) error

// Run consumes every stream, calling handle for each job, until ctx ends;
// then it stops fetching, lets the jobs in flight finish (their context is
// not cancelled), hands back the ones not started, gives up the partitions
// it was pinned to and returns.
//
// With partition consumers (NATS 2.11+), the nodes running the queue
// share out the partitions of each stream (see Sharing partitions out in the package doc): Run pulls only
// this node's share and hands a partition over when the nodes change.
func (q *NotifyQueue) Run(ctx context.Context, handle Handler) error {
	var m *members // nil: pull every consumer
	if q.pinned {
		p, err := q.startPresence(ctx)
		if err != nil {
			return err
		}
		defer p.wait()
		m = p.m
	}
	var wg sync.WaitGroup
	jobCtx := context.WithoutCancel(ctx)
	gate := newPriorityGate(q.o.BusyCriticalWorkers)
	for _, l := range q.lanes {
		wg.Go(func() {
			// The jobs not started are handed back only once every pull
			// has stopped: a job handed back while its subscription drains
			// comes straight back to it, and may then run after the
			// user's next job, once another node has the partition.
			stop := make(chan struct{})
			r := newKeyedRunner(l.workers, l.consumers[0].AckWait/3, stop, gate, l.key.cat.Urgent(), func(t task) { q.handleMsg(jobCtx, ctx, t, handle) })
			var pulls sync.WaitGroup
			pins := make([]string, len(l.consumers))
			for i := range l.consumers {
				pulls.Go(func() { pins[i] = q.partition(ctx, l, i, r, m) })
			}
			pulls.Wait()
			close(stop)
			r.close()
			q.unpin(jobCtx, l, pins)
		})
	}
	wg.Wait()
	return nil
}

// unpin hands back the partitions this node still holds, once the jobs it
// took from them are done or handed back, so that another node takes them
// over at once rather than after pinnedTTL.
func (q *NotifyQueue) unpin(ctx context.Context, l *lane, pins []string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for i, pin := range pins {
		q.unpinOne(ctx, l, i, pin)
	}
}

// unpinOne unpins consumer i of l if it is still pinned to pin, after
// flushing l.sub: the acknowledgements and hand-backs sent so far reach
// the server first, so the next node is not served after a job this one
// still appears to hold.
func (q *NotifyQueue) unpinOne(ctx context.Context, l *lane, i int, pin string) {
	if pin == "" {
		return
	}
	_ = flush(ctx, l.sub)
	name := l.consumers[i].Durable
	c, err := l.str.Consumer(ctx, name)
	if err != nil {
		return
	}
	for _, g := range c.CachedInfo().PriorityGroups {
		if g.Group == pinGroup && g.PinnedClientID == pin {
			if err := l.str.UnpinConsumer(ctx, name, pinGroup); err != nil {
				q.log.Debug("queue: unpin", "consumer", name, logKeyError, err)
			}
		}
	}
}

// consume pulls from consumer i of l's stream into r until ctx ends,
// and returns the pin id the server last gave this node ("" if none). It
// subscribes again when the server stops answering, and makes the
// consumer again when it was deleted or stays stuck (see subscription).
// When ctx ends it drains the subscription: the jobs the server already
// sent are dispatched to r too, none is left unseen in the client's
// buffer (where it would wait out AckWait, behind the user's later jobs).
func (q *NotifyQueue) consume(ctx context.Context, l *lane, i int, r *keyedRunner, m *members) (pin string) {
	s := q.newSubscription(l, i)
	stop := context.AfterFunc(ctx, s.drain)
	defer stop()
	defer s.drainOnWake(ctx, m)()
	if !s.subscribe(ctx) {
		return ""
	}
	gate := q.settleGate(ctx, l, i, r)
	defer gate.close()
	var delivered uint64 // the consumer sequence of the last delivery received
	for {
		msg, err := s.next()
		if err != nil {
			if ctx.Err() != nil || l.sub.IsClosed() || !s.recover(ctx, err, pin) {
				return pin
			}
			continue
		}
		s.missed, s.resubscribed = 0, 0
		pin, delivered = s.receive(msg, gate, pin, delivered)
	}
}

// flush waits until the server has everything published on nc. nats.go
// insists on a deadline; without one in ctx, 10 seconds.
func flush(ctx context.Context, nc *nats.Conn) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	return nc.FlushWithContext(ctx)
}

// Asking again in place. inFlightPoll is how often a copy of a job whose
// delivery another worker has claimed asks again (the claim of a worker
// that died lapses within seconds: the copy takes it over soon after); a job that failed
// otherwise (the store unreachable) is tried again after retryPauseMin,
// doubling up to retryPauseMax, for up to retryInPlace in all.
const (
	inFlightPoll  = 250 * time.Millisecond
	retryPauseMin = 250 * time.Millisecond
	retryPauseMax = 2 * time.Second
	retryInPlace  = 30 * time.Second
)

// handleMsg runs t's job on ctx and acknowledges it. A job that fails
// stays here and is tried again, so the user's later jobs on this node
// wait behind it and keep their order: a copy of a job whose delivery
// another worker holds the claim of (notify.ErrInFlight: its node stopped
// answering, so the job was delivered again) asks every inFlightPoll until
// the claim is given up or lapses; a job that failed otherwise (the store
// restarting) is tried with a growing pause for up to retryInPlace, then
// handed back (NAK) to be delivered again later, as it is at once when run
// ends (the node stops).
func (q *NotifyQueue) handleMsg(ctx, run context.Context, t task, handle Handler) {
	began, pause := time.Now(), retryPauseMin
	for {
		err := handle(ctx, t.job)
		if err == nil {
			if err := t.msg.Ack(); err != nil {
				q.log.Warn("ack failed; the job may run again", "job", t.job.MsgID(), logKeyError, err)
			}
			return
		}
		inFlight := errors.Is(err, notify.ErrInFlight)
		wait := inFlightPoll
		if !inFlight {
			wait, pause = pause, min(2*pause, retryPauseMax)
		}
		if run.Err() == nil && ctx.Err() == nil && (inFlight || time.Since(began)+wait <= retryInPlace) {
			q.log.Debug("job not done; trying again in place", "job", t.job.MsgID(), "in_flight", inFlight, logKeyError, err)
			select {
			case <-run.Done():
			case <-time.After(wait):
				continue
			}
		}
		level := slog.LevelWarn
		if inFlight {
			level = slog.LevelDebug
		}
		q.log.Log(ctx, level, "job not done; it will be delivered again", "job", t.job.MsgID(), logKeyError, err)
		_ = t.msg.NakWithDelay(2 * time.Second)
		return
	}
}
