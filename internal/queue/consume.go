package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
// share out the partitions of each stream (see balance.go): Run pulls only
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
// consumer again when it was deleted or stays stuck. When ctx ends it
// drains the subscription: the jobs the server already sent are
// dispatched to r too, none is left unseen in the client's buffer (where
// it would wait out AckWait, behind the user's later jobs).
func (q *NotifyQueue) consume(ctx context.Context, l *lane, i int, r *keyedRunner, m *members) (pin string) {
	cfg := l.consumers[i]
	stream := q.streamName(l.key)
	log := q.log.With("stream", stream, "consumer", cfg.Durable)
	var (
		mu sync.Mutex // it is replaced while ctx's AfterFunc may stop it
		it jetstream.MessagesContext
		// cons is kept across subscriptions: the client keeps the pin the
		// server gave it on the consumer handle, and a new handle's pulls,
		// without it, would not be served until the pin lapsed.
		cons jetstream.Consumer
	)
	drain := func() {
		mu.Lock()
		defer mu.Unlock()
		if it != nil {
			it.Drain()
		}
	}
	stop := context.AfterFunc(ctx, drain)
	defer stop()
	// Back from a pause, this node's pull requests may have expired or
	// been dropped without the client knowing (it would wait for missed
	// heartbeats, seconds): drained, the subscription is made again at
	// once, on the same handle.
	returned := make(chan struct{})
	defer close(returned)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-returned:
				return
			case <-m.woken():
				drain()
			}
		}
	}()
	// subscribe replaces it with a new subscription, making the consumer
	// first when it is gone; it retries until it succeeds or ctx ends.
	subscribe := func() bool {
		for {
			c, next, err := q.subscribe(ctx, l, cfg, cons)
			cons = c // nil after an error: the next try makes a new handle
			if err == nil {
				mu.Lock()
				if it != nil {
					it.Stop()
				}
				it = next
				if ctx.Err() != nil { // the AfterFunc may have run before
					next.Drain()
				}
				mu.Unlock()
				return true
			}
			if ctx.Err() != nil || l.sub.IsClosed() {
				return false
			}
			log.Warn("queue: subscribe", logKeyError, err)
			select {
			case <-ctx.Done():
				return false
			case <-time.After(retryPause):
			}
		}
	}
	if !subscribe() {
		return ""
	}
	gate := q.settleGate(ctx, l, i, r)
	defer gate.close()
	missed, resubscribed := 0, 0 // heartbeats missed in a row; new subscriptions that did not help
	var delivered uint64         // the consumer sequence of the last delivery received
	for {
		mu.Lock()
		cur := it
		mu.Unlock()
		m, err := cur.Next()
		if err != nil {
			if ctx.Err() != nil || l.sub.IsClosed() {
				return pin
			}
			switch {
			case errors.Is(err, jetstream.ErrMsgIteratorClosed):
				log.Info("queue: pulling again", logKeyError, err) // drained: back from a pause
				if !subscribe() {
					return pin
				}
				missed = 0
			case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound):
				log.Warn("queue: consumer gone; making it again", logKeyError, err)
				cons = nil
				if !subscribe() {
					return pin
				}
				missed = 0
			case errors.Is(err, jetstream.ErrNoHeartbeat):
				if l.sub.Status() != nats.CONNECTED {
					missed = 0 // reconnecting: the client re-pulls once connected
					continue
				}
				if missed++; missed < stalledAfter {
					continue
				}
				log.Warn("queue: no heartbeat from the server; subscribing again", "missed", missed)
				missed = 0
				if resubscribed++; resubscribed > 1 && q.stuck(ctx, l, cfg, pin) {
					// A new subscription did not help and the server
					// holds jobs it does not hand out: the consumer
					// itself is stuck. Jobs other nodes hold are
					// delivered again (the recovery sweep and the
					// delivery claims make that a duplicate at worst).
					log.Error("queue: consumer stuck with jobs waiting; making it again")
					if err := l.str.DeleteConsumer(ctx, cfg.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
						log.Warn("queue: delete stuck consumer", logKeyError, err)
					}
					cons = nil
					resubscribed = 0
				}
				if !subscribe() {
					return pin
				}
			default:
				log.Warn("queue: fetch", logKeyError, err)
			}
			continue
		}
		missed, resubscribed = 0, 0
		l.received[i].Add(1)
		md, mdErr := m.Metadata()
		p := m.Headers().Get("Nats-Pin-Id")
		// A delivery of a pinned partition that did not reach this node
		// (the consumer's delivery sequence skipped one: it went to a
		// connection that dropped, or to a pull request nobody reads) is
		// out until its ack wait lapses, and the user's later jobs must
		// not pass it; nor may they pass jobs another node held while the
		// partition was pinned elsewhere. Either way the partition
		// settles again (see settle.go).
		if (p != "" && pin != "" && p != pin) || (mdErr == nil && delivered != 0 && md.Sequence.Consumer != delivered+1) {
			gate.rearm()
		}
		if p != "" {
			pin = p
		}
		if mdErr == nil {
			delivered = md.Sequence.Consumer
		}
		var j notify.Job
		if err := json.Unmarshal(m.Data(), &j); err != nil {
			log.Error("queue: dropping a malformed job", logKeyError, err)
			_ = m.Term()
			continue
		}
		if mdErr != nil || md.NumDelivered > 1 {
			j.Redelivered = true
		}
		gate.dispatch(task{job: j, msg: m, part: i})
	}
}

// subscribe starts pulling from cfg's consumer through the handle cons,
// or, with cons nil, a new handle, first making the consumer (as
// ensureConsumer does) when the server no longer has it. It returns the
// handle it pulls through.
func (q *NotifyQueue) subscribe(ctx context.Context, l *lane, cfg jetstream.ConsumerConfig, cons jetstream.Consumer) (jetstream.Consumer, jetstream.MessagesContext, error) {
	if cons == nil {
		var err error
		cons, err = l.subJS.Consumer(ctx, q.streamName(l.key), cfg.Durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			if err = ensureConsumer(ctx, l.str, cfg); err == nil {
				cons, err = l.subJS.Consumer(ctx, q.streamName(l.key), cfg.Durable)
			}
		}
		if err != nil {
			return nil, nil, err
		}
	}
	opts := []jetstream.PullMessagesOpt{
		jetstream.PullMaxMessages(2 * l.workers), jetstream.PullExpiry(pullExpiry),
		jetstream.PullHeartbeat(pullHeartbeat), jetstream.WithMessagesErrOnMissingHeartbeat(true),
	}
	if cfg.PriorityPolicy == jetstream.PriorityPolicyPinned {
		opts = append(opts, jetstream.PullPriorityGroup(pinGroup))
	}
	it, err := cons.Messages(opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("pull: %w", err)
	}
	return cons, it, nil
}

// stuck reports whether cfg's consumer holds jobs it hands to nobody: jobs
// are waiting, fewer than MaxAckPending are out, and the consumer is not
// pinned to another node (whose pulls it rightly answers instead of ours).
func (q *NotifyQueue) stuck(ctx context.Context, l *lane, cfg jetstream.ConsumerConfig, pin string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := l.str.Consumer(ctx, cfg.Durable)
	if err != nil {
		return false // unknown: the stream may be electing a leader
	}
	info := c.CachedInfo()
	for _, g := range info.PriorityGroups {
		if g.PinnedClientID != "" && g.PinnedClientID != pin {
			return false
		}
	}
	return info.NumPending > 0 && info.NumAckPending < cfg.MaxAckPending
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
