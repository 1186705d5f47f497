package queue

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// handOverPoll is how often a partition being handed over checks whether
// the jobs this node holds of it are done.
const handOverPoll = 10 * time.Millisecond

// partition consumes partition i of l into r whenever m assigns it to
// this node, until ctx ends, and returns the pin the server gave this node
// that is still to be handed back ("" if none). With m nil, every
// partition is this node's.
func (q *NotifyQueue) partition(ctx context.Context, l *lane, i int, r *keyedRunner, m *members) (pin string) {
	defer l.holds[i].Store(false)
	if m == nil {
		l.holds[i].Store(true)
		return q.consume(ctx, l, i, r, m)
	}
	mine := func(view []string) bool { return view[owner(view, l.index, i)] == m.self }
	var before []string // the last view in which the partition was not this node's
	acquire := func(view []string) bool {
		if mine(view) {
			return true
		}
		before = view
		return false
	}
	for m.wait(ctx, acquire) {
		// Taken over from a node presumed dead: its pin is to be dropped,
		// for critical streams only. A node merely paused past
		// presenceTimeout still holds jobs; other streams keep its pin
		// until pinnedTTL, so their users' order holds across the pause.
		fromDead := l.key.cat == notify.Critical && before != nil && m.presumedDead(before[owner(before, l.index, i)])
		before = nil
		l.holds[i].Store(true)
		pctx, cancel := context.WithCancel(ctx)
		released := make(chan struct{})
		go func() {
			defer close(released)
			if m.wait(pctx, func(view []string) bool { return !mine(view) }) {
				cancel()
			}
		}()
		watched := make(chan struct{})
		go func() { defer close(watched); q.watchPin(pctx, l, i, fromDead) }()
		pin = q.consume(pctx, l, i, r, m)
		cancel()
		<-released
		<-watched
		if ctx.Err() != nil || l.sub.IsClosed() {
			return pin
		}
		q.log.Debug("queue: handing a partition over", "stream", q.streamName(l.key), "consumer", l.consumers[i].Durable)
		if !q.handOver(ctx, l, i, r, pin) {
			return pin
		}
		l.holds[i].Store(false)
		pin = ""
	}
	return pin
}

// handOver waits until r holds no job of partition i, then unpins it from
// pin. It reports false, with the partition still pinned, if ctx ended
// first.
func (q *NotifyQueue) handOver(ctx context.Context, l *lane, i int, r *keyedRunner, pin string) bool {
	tick := time.NewTicker(handOverPoll)
	defer tick.Stop()
	for r.holdingPart(i) > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	q.unpinOne(uctx, l, i, pin)
	return true
}

// pinCheck is how often a node checks a partition it owns for a pin that
// no node uses (see watchPin); deadPinCheck is how often it first
// checks one it took over from a node presumed dead (see unpinDead).
const (
	pinCheck     = pullExpiry
	deadPinCheck = 100 * time.Millisecond
)

// watchPin unpins partition i of l, which this node owns and pulls, when
// the server keeps it pinned to a client that is not served: nats-server
// pins a partition to the first pull request waiting when a job arrives,
// even one whose subscriber is gone (a node that stopped pulling leaves
// its requests waiting until they expire), then drops that request and
// keeps the pin, so the partition stalls until pinnedTTL. When two checks
// pinCheck apart see the same pin, jobs waiting, none out to any node and
// none received here, no node holds a job of the partition, so unpinning
// it cannot put a user's jobs on two nodes; the server then pins one of
// this node's requests. It returns when ctx ends.
//
// With fromDead (the partition was a node's that is presumed dead), it
// first unpins the partition whenever it is pinned while no job of it
// has reached this node yet (see unpinDead): the pin is the dead node's
// (the server may pin a stale pull request of the dead node again after
// an unpin, hence the repeats). An unpin that
// races with this node's own fresh pin costs a new pin, nothing more:
// only this node pulls the partition.
func (q *NotifyQueue) watchPin(ctx context.Context, l *lane, i int, fromDead bool) {
	name := l.consumers[i].Durable
	seen := l.received[i].Load()
	if fromDead {
		q.unpinDead(ctx, l, i, seen)
		seen = l.received[i].Load()
	}
	tick := time.NewTicker(pinCheck)
	defer tick.Stop()
	var suspect string // the pin seen unserved at the last check
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if n := l.received[i].Load(); n != seen {
			seen, suspect = n, ""
			continue
		}
		c, err := l.str.Consumer(ctx, name)
		if err != nil {
			continue
		}
		info, stalled := c.CachedInfo(), ""
		for _, g := range info.PriorityGroups {
			if g.Group == pinGroup && g.PinnedClientID != "" && info.NumPending > 0 && info.NumAckPending == 0 {
				stalled = g.PinnedClientID
			}
		}
		if stalled != "" && stalled == suspect && l.received[i].Load() == seen {
			q.log.Info("queue: unpinning a partition pinned to a client that is not served",
				"stream", q.streamName(l.key), "consumer", name)
			if err := l.str.UnpinConsumer(ctx, name, pinGroup); err != nil {
				q.log.Debug("queue: unpin", "consumer", name, logKeyError, err)
			}
			stalled = ""
		}
		suspect = stalled
	}
}

// unpinDead unpins partition i of l, taken over from a node presumed
// dead, whenever it is pinned while this node has received nothing of it
// since it had received seen jobs, checking every deadPinCheck, then less
// often; it gives up after the dead node's last pull requests have
// expired (pullExpiry: no pin can go to it after that), or when ctx ends.
func (q *NotifyQueue) unpinDead(ctx context.Context, l *lane, i int, seen int64) {
	name := l.consumers[i].Durable
	deadline := time.Now().Add(pullExpiry + time.Second)
	for wait := deadPinCheck; l.received[i].Load() == seen && time.Now().Before(deadline); wait = min(2*wait, 5*deadPinCheck) {
		c, err := l.str.Consumer(ctx, name)
		if err == nil && l.received[i].Load() == seen {
			for _, g := range c.CachedInfo().PriorityGroups {
				if g.Group != pinGroup || g.PinnedClientID == "" {
					continue
				}
				q.log.Info("queue: unpinning a partition of a node presumed dead", "stream", q.streamName(l.key), "consumer", name)
				if err := l.str.UnpinConsumer(ctx, name, pinGroup); err != nil {
					q.log.Debug("queue: unpin", "consumer", name, logKeyError, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
