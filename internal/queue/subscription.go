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

// subscription is this node's pull from consumer i of l's stream, for
// consume: the message iterator, replaced when the server stops answering,
// and the consumer handle it pulls through.
type subscription struct {
	q   *NotifyQueue
	l   *lane
	i   int
	cfg jetstream.ConsumerConfig
	log *slog.Logger

	mu sync.Mutex // it is replaced while ctx's AfterFunc may stop it
	it jetstream.MessagesContext
	// cons is kept across subscriptions: the client keeps the pin the
	// server gave it on the consumer handle, and a new handle's pulls,
	// without it, would not be served until the pin lapsed.
	cons jetstream.Consumer

	missed       int // heartbeats missed in a row
	resubscribed int // new subscriptions that did not help
}

func (q *NotifyQueue) newSubscription(l *lane, i int) *subscription {
	cfg := l.consumers[i]
	return &subscription{
		q: q, l: l, i: i, cfg: cfg,
		log: q.log.With("stream", q.streamName(l.key), "consumer", cfg.Durable),
	}
}

// drain drains the current iterator: it delivers what the server already
// sent, then ends with jetstream.ErrMsgIteratorClosed.
func (s *subscription) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.it != nil {
		s.it.Drain()
	}
}

// drainOnWake drains the subscription whenever m says this node is back
// from a pause, until ctx ends or the returned stop is called: its pull
// requests may have expired or been dropped without the client knowing
// (it would wait for missed heartbeats, seconds), so the subscription is
// made again at once, on the same handle.
func (s *subscription) drainOnWake(ctx context.Context, m *members) (stop func()) {
	returned := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-returned:
				return
			case <-m.woken():
				s.drain()
			}
		}
	}()
	return func() { close(returned) }
}

// next waits for the next delivery of the current iterator.
func (s *subscription) next() (jetstream.Msg, error) {
	s.mu.Lock()
	cur := s.it
	s.mu.Unlock()
	return cur.Next()
}

// subscribe replaces the iterator with a new subscription, making the
// consumer first when it is gone; it retries until it succeeds or ctx
// ends, and reports whether it succeeded.
func (s *subscription) subscribe(ctx context.Context) bool {
	for {
		c, next, err := s.q.subscribe(ctx, s.l, s.cfg, s.cons)
		s.cons = c // nil after an error: the next try makes a new handle
		if err == nil {
			s.mu.Lock()
			if s.it != nil {
				s.it.Stop()
			}
			s.it = next
			if ctx.Err() != nil { // the AfterFunc may have run before
				next.Drain()
			}
			s.mu.Unlock()
			return true
		}
		if ctx.Err() != nil || s.l.sub.IsClosed() {
			return false
		}
		s.log.Warn("queue: subscribe", logKeyError, err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(retryPause):
		}
	}
}

// recover answers an error of next while ctx lives: it subscribes again
// when the iterator was drained or the consumer is gone, and when
// heartbeats stay missing (making the consumer again when a new
// subscription did not help and it is stuck). It reports false when
// consume should end.
func (s *subscription) recover(ctx context.Context, err error, pin string) bool {
	switch {
	case errors.Is(err, jetstream.ErrMsgIteratorClosed):
		s.log.Info("queue: pulling again", logKeyError, err) // drained: back from a pause
		if !s.subscribe(ctx) {
			return false
		}
		s.missed = 0
	case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrConsumerNotFound):
		s.log.Warn("queue: consumer gone; making it again", logKeyError, err)
		s.cons = nil
		if !s.subscribe(ctx) {
			return false
		}
		s.missed = 0
	case errors.Is(err, jetstream.ErrNoHeartbeat):
		if s.l.sub.Status() != nats.CONNECTED {
			s.missed = 0 // reconnecting: the client re-pulls once connected
			return true
		}
		if s.missed++; s.missed < stalledAfter {
			return true
		}
		s.log.Warn("queue: no heartbeat from the server; subscribing again", "missed", s.missed)
		s.missed = 0
		if s.resubscribed++; s.resubscribed > 1 && s.q.stuck(ctx, s.l, s.cfg, pin) {
			// A new subscription did not help and the server
			// holds jobs it does not hand out: the consumer
			// itself is stuck. Jobs other nodes hold are
			// delivered again (the recovery sweep and the
			// delivery claims make that a duplicate at worst).
			s.log.Error("queue: consumer stuck with jobs waiting; making it again")
			if err := s.l.str.DeleteConsumer(ctx, s.cfg.Durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				s.log.Warn("queue: delete stuck consumer", logKeyError, err)
			}
			s.cons = nil
			s.resubscribed = 0
		}
		if !s.subscribe(ctx) {
			return false
		}
	default:
		s.log.Warn("queue: fetch", logKeyError, err)
	}
	return true
}

// receive passes one delivery to gate as a task and returns the pin and
// the consumer sequence it carries (pin and delivered, the ones before,
// when it carries none).
func (s *subscription) receive(m jetstream.Msg, gate *settle, pin string, delivered uint64) (string, uint64) {
	s.l.received[s.i].Add(1)
	md, mdErr := m.Metadata()
	p := m.Headers().Get("Nats-Pin-Id")
	// A delivery of a pinned partition that did not reach this node
	// (the consumer's delivery sequence skipped one: it went to a
	// connection that dropped, or to a pull request nobody reads) is
	// out until its ack wait lapses, and the user's later jobs must
	// not pass it; nor may they pass jobs another node held while the
	// partition was pinned elsewhere. Either way the partition
	// settles again (see Settling a partition in the package doc).
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
		s.log.Error("queue: dropping a malformed job", logKeyError, err)
		_ = m.Term()
		return pin, delivered
	}
	if mdErr != nil || md.NumDelivered > 1 {
		j.Redelivered = true
	}
	gate.dispatch(task{job: j, msg: m, part: s.i})
	return pin, delivered
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
