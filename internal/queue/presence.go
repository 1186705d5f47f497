package queue

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Presence timings. A running queue announces itself every
// presenceInterval; a peer not heard for presenceTimeout (five
// announcements missed) is presumed dead, so a killed node's partitions
// are taken over within about 3 s of its death (see Sharing partitions out in the package doc).
const (
	presenceInterval = 500 * time.Millisecond
	presenceTimeout  = 5 * presenceInterval
)

// Presence announcements: "<kind> <node id>".
const (
	presenceHello = "hello" // a node starts: everyone answers with alive at once
	presenceAlive = "alive"
	presenceBye   = "bye" // a node stops: its partitions are for the others now
)

// members is what one node knows of the nodes running the queue: itself
// and the peers it heard from within presenceTimeout. It is safe for
// concurrent use.
type members struct {
	self string

	mu      sync.Mutex
	seen    map[string]time.Time // peer -> when last heard
	checked time.Time            // the last expire
	dead    map[string]time.Time // peer -> when presumed dead (not heard, no goodbye), for pinnedTTL
	view    []string             // sorted node ids, self included
	changed chan struct{}        // closed, and replaced, when view changes
	woke    chan struct{}        // closed, and replaced, when this node is back from a pause
}

func newMembers(self string) *members {
	return &members{self: self, seen: map[string]time.Time{}, dead: map[string]time.Time{}, view: []string{self}, changed: make(chan struct{}),
		woke: make(chan struct{})}
}

// heard records that peer id was alive at t.
func (m *members) heard(id string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seen[id] = t
	delete(m.dead, id)
	m.update()
}

// left forgets peer id at once.
func (m *members) left(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.seen, id)
	m.update()
}

// expire forgets the peers not heard within presenceTimeout of now. Time
// this node itself did not run (frozen, or starved of CPU: its checks
// came more than presenceInterval late) does not count against its peers:
// their announcements of that time may still be unread, and a node back
// from a pause would otherwise presume every other node dead and pull
// their partitions.
func (m *members) expire(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.checked.IsZero() {
		if away := now.Sub(m.checked) - presenceInterval; away > presenceInterval {
			for id, t := range m.seen {
				m.seen[id] = t.Add(away)
			}
			if away > 2*presenceInterval {
				close(m.woke) // its pulls may be stale: see consume
				m.woke = make(chan struct{})
			}
		}
	}
	m.checked = now
	for id, t := range m.seen {
		if now.Sub(t) > presenceTimeout {
			delete(m.seen, id)
			m.dead[id] = now
		}
	}
	for id, t := range m.dead {
		if now.Sub(t) > pinnedTTL {
			delete(m.dead, id)
		}
	}
	m.update()
}

// update recomputes view and signals a change. Call it with mu held.
func (m *members) update() {
	view := []string{m.self}
	for id := range m.seen {
		view = append(view, id)
	}
	slices.Sort(view)
	if slices.Equal(view, m.view) {
		return
	}
	m.view = view
	close(m.changed)
	m.changed = make(chan struct{})
}

// woken returns a channel closed when this node is next back from a
// pause (frozen, or starved of CPU, for over a second); nil, which never
// fires, for m nil.
func (m *members) woken() <-chan struct{} {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.woke
}

// presumedDead reports whether peer id left the view because it was not
// heard within presenceTimeout (rather than saying goodbye), less than
// pinnedTTL ago.
func (m *members) presumedDead(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.dead[id]
	return ok
}

// current returns the sorted node ids and a channel closed at the next
// change.
func (m *members) current() ([]string, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view, m.changed
}

// wait blocks until cond holds for the current view or ctx ends, and
// reports whether cond holds.
func (m *members) wait(ctx context.Context, cond func(view []string) bool) bool {
	for {
		view, changed := m.current()
		if cond(view) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

// owner returns the index in a sorted view of the node that should hold
// partition p of the lane at index lane: partitions go round the nodes,
// each lane starting one node further, so every node holds
// floor(partitions/nodes) or one more of each stream, and the extra ones
// are spread over the nodes across streams. The assignment depends only
// on the view: nodes that agree on it agree on every owner.
func owner(view []string, lane, p int) int { return (lane + p) % len(view) }

// presence announces this node on subject and keeps m up to date from the
// other nodes' announcements, until ctx ends; it then says goodbye, so the
// others start pulling its partitions while it hands them over.
type presence struct {
	nc      *nats.Conn
	subject string
	m       *members
	sub     *nats.Subscription
	done    chan struct{}
}

// startPresence subscribes to the queue's presence subject, says hello
// and starts announcing itself every presenceInterval until ctx ends.
// Call stop to wait for the goodbye.
func (q *NotifyQueue) startPresence(ctx context.Context) (*presence, error) {
	p := &presence{nc: q.c.nc, subject: q.c.Name("notify.nodes"), m: newMembers(rand.Text()), done: make(chan struct{})}
	var err error
	p.sub, err = p.nc.Subscribe(p.subject, func(msg *nats.Msg) {
		kind, id, ok := strings.Cut(string(msg.Data), " ")
		if !ok || id == p.m.self {
			return
		}
		switch kind {
		case presenceHello:
			p.m.heard(id, time.Now())
			p.announce(presenceAlive)
		case presenceAlive:
			p.m.heard(id, time.Now())
		case presenceBye:
			p.m.left(id)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("queue: presence: %w", err)
	}
	p.announce(presenceHello)
	go p.run(ctx)
	return p, nil
}

func (p *presence) announce(kind string) { _ = p.nc.Publish(p.subject, []byte(kind+" "+p.m.self)) }

func (p *presence) run(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(presenceInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = p.sub.Unsubscribe()
			p.announce(presenceBye)
			_ = flush(context.WithoutCancel(ctx), p.nc)
			return
		case <-tick.C:
			p.announce(presenceAlive)
			p.m.expire(time.Now()) // not the tick's time, which may predate a pause
		}
	}
}

// wait returns once the goodbye is sent; ctx passed to startPresence
// must have ended.
func (p *presence) wait() { <-p.done }
