package queue

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// settlePoll is how often a partition just taken looks whether it has
// settled; settleSlack is how long past the consumer's ack wait it waits
// at most (see Settling a partition in the package doc).
const (
	settlePoll  = 50 * time.Millisecond
	settleSlack = time.Second
)

// settle holds the jobs of partition i of l that reach this node until
// the partition has settled, then passes them, and every later one, to r.
type settle struct {
	mu   sync.Mutex
	open bool
	held []held // while not open, in arrival order
	r    *keyedRunner

	since  time.Time // when the gate last closed: a rearm does not move it
	watch  func()    // starts a watcher that opens the gate (with mu held)
	cancel context.CancelFunc
	done   chan struct{}
}

// held is a job waiting for its partition to settle, with its sequences.
type held struct {
	t          task
	stream     uint64 // the stream sequence: the job's place in the partition
	deliveries uint64 // the consumer sequence of this delivery
}

// settleGate returns an open gate when l is not pinned (every node pulls
// every consumer: there is no taking over), else a gate that opens once
// partition i has settled. Call close when consume ends.
func (q *NotifyQueue) settleGate(ctx context.Context, l *lane, i int, r *keyedRunner) *settle {
	g := &settle{r: r, done: make(chan struct{})}
	if l.consumers[i].PriorityPolicy != jetstream.PriorityPolicyPinned {
		g.open = true
		close(g.done)
		g.cancel = func() {}
		return g
	}
	g.open = true
	g.watch = func() {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		if g.open {
			g.since = time.Now()
		}
		g.cancel, g.done, g.open = cancel, done, false
		go func() {
			defer close(done)
			q.watchSettle(ctx, l, i, g)
		}()
	}
	g.watch()
	return g
}

// rearm closes g again, holding what arrives until the partition has
// settled anew: the server pinned the partition to this node afresh, so
// another node may have held jobs of it meanwhile. The jobs g holds stay
// held, and the bound on holding still counts from when g closed, so
// pins that keep changing cannot hold a job longer. Call it from the
// goroutine that calls dispatch.
func (g *settle) rearm() {
	if g.watch == nil {
		return // not pinned
	}
	g.cancel()
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watch()
}

// dispatch passes t to the runner, or holds it until the gate opens.
func (g *settle) dispatch(t task) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		g.r.dispatch(t)
		return
	}
	h := held{t: t}
	if md, err := t.msg.Metadata(); err == nil {
		h.stream, h.deliveries = md.Sequence.Stream, md.Sequence.Consumer
	}
	g.held = append(g.held, h)
}

// openGate passes the held jobs to the runner in stream order (a job
// delivered twice while held keeps its latest delivery) and lets every
// later one through.
func (g *settle) openGate() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		return
	}
	g.open = true
	slices.SortStableFunc(g.held, func(a, b held) int {
		return cmp.Or(cmp.Compare(a.stream, b.stream), cmp.Compare(a.deliveries, b.deliveries))
	})
	for k, h := range g.held {
		if k+1 < len(g.held) && h.stream != 0 && g.held[k+1].stream == h.stream {
			continue // delivered again while held: the later copy runs
		}
		g.r.dispatch(h.t)
	}
	g.held = nil
}

// close stops watching and opens the gate: the jobs still held run (or,
// when the node stops, are handed back by the runner).
func (g *settle) close() {
	g.cancel()
	<-g.done
	g.openGate()
}

// mine counts the held jobs the server had delivered by consumer sequence
// delivered.
func (g *settle) mine(delivered uint64) (n int, msgs []jetstream.Msg) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, h := range g.held {
		if h.deliveries <= delivered {
			n++
		}
		msgs = append(msgs, h.t.msg)
	}
	return n, msgs
}

// watchSettle opens g once no job of partition i is out to a node but
// this one, looking every settlePoll, and keeps the held jobs alive
// meanwhile; it opens g anyway after the ack wait and settleSlack. When
// ctx ends first it returns with g still closed (see close and rearm).
func (q *NotifyQueue) watchSettle(ctx context.Context, l *lane, i int, g *settle) {
	cfg := l.consumers[i]
	began := g.since
	deadline := began.Add(cfg.AckWait + settleSlack)
	lastAlive := began
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if q.settled(ctx, l, i, g) {
			if waited := time.Since(began); waited > 10*settlePoll {
				q.log.Info("queue: a partition taken over had jobs out to another node; ran them first",
					"stream", q.streamName(l.key), "consumer", cfg.Durable, "waited", waited.Round(time.Millisecond))
			}
			g.openGate()
			return
		}
		if time.Since(lastAlive) >= cfg.AckWait/3 {
			_, msgs := g.mine(0)
			for _, m := range msgs {
				_ = m.InProgress()
			}
			lastAlive = time.Now()
		}
		select {
		case <-ctx.Done():
		case <-time.After(settlePoll):
		}
	}
	if ctx.Err() == nil {
		q.log.Warn("queue: a partition taken over did not settle within its ack wait; running its jobs",
			"stream", q.streamName(l.key), "consumer", cfg.Durable)
		g.openGate()
	}
}

// settled reports whether every job of partition i that the server counts
// as out (delivered, not acknowledged) is one this node holds: held by g,
// or still in the runner from an earlier turn with the partition.
func (q *NotifyQueue) settled(ctx context.Context, l *lane, i int, g *settle) bool {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := l.str.Consumer(rctx, l.consumers[i].Durable)
	if err != nil {
		return false // unknown (a leader election, say): look again
	}
	info := c.CachedInfo()
	n, _ := g.mine(info.Delivered.Consumer)
	return info.NumAckPending <= n+g.r.holdingPart(i)
}
