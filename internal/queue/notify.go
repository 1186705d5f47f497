package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/notify"
)

// NotifyOptions configure [Conn.NotifyQueue]. Zero fields take defaults.
type NotifyOptions struct {
	// Partitions is the number of subjects per stream, chosen by a hash of
	// the user id. If zero, 8. See NotifyQueue.
	Partitions int
	// AckWait is how long a job may stay unacknowledged before JetStream
	// delivers it again. If zero, 30 seconds.
	AckWait time.Duration
	// Duplicates is JetStream's deduplication window for Nats-Msg-Id.
	// If zero, 2 minutes.
	Duplicates time.Duration
	// Workers is the number of jobs handled at once per stream, per
	// category. Missing categories get critical 32, orders 64, marketing 64.
	Workers map[notify.Category]int
	// Unconfirmed publishes jobs without JetStream's acknowledgement (core
	// NATS publishes to the streams' subjects, still deduplicated by
	// Nats-Msg-Id). A job the server loses is then noticed only by the
	// recovery sweep, after its threshold, instead of being logged at once;
	// in exchange each job costs one message fewer, and the node accepts
	// about 8% more notifications per second.
	Unconfirmed bool
	// Logger receives consumer errors. If nil, nothing is logged.
	Logger *slog.Logger
}

// NotifyQueue is the notification pipeline's queue: one JetStream stream
// per channel x category (NOTIFY_EMAIL_CRITICAL takes the subjects
// notify.email.critical.<partition>), each with its own durable consumer
// and its own workers, so a backlog of marketing jobs never sits in front
// of a critical one.
//
// Ordering: JetStream hands a stream's jobs to its consumer in publish
// order, and NotifyQueue runs at most one job per user at a time within a
// stream, in that order (a user's later jobs wait behind the one in
// flight; other users' jobs do not). So one user's messages on one channel
// are attempted in the order they were accepted. Retries trade that away
// on purpose: a failed attempt is acknowledged and republished when its
// backoff is due, so the user's later messages may overtake it instead of
// stalling behind a provider outage, and a stale offer behind an OTP
// matters less than the OTP. The order holds per node: with several nodes
// on one consumer, two jobs of one user may run at once on different
// nodes. The partition token in the subject is there so a consumer per
// partition, pinned to one node (NATS 2.11 priority groups), can make it
// hold across nodes without renaming anything.
//
// Streams use work-queue retention: an acknowledged job is deleted, so
// the first message of a stream is the oldest job not yet handled, which
// Horizon reports to the recovery sweep.
type NotifyQueue struct {
	c     *Conn
	o     NotifyOptions
	log   *slog.Logger
	lanes map[streamKey]*lane
}

// lane is one stream and the two connections of its own that publish to
// it and consume from it. A NATS connection is one lock and, on the
// server, one goroutine that handles its messages in turn, so with one
// connection for every stream, publishes and acknowledgements of all
// streams waited for each other (under load, dozens of requests queued on
// the publishing connection's lock). Per stream, they run in parallel,
// and one stream's publishes still keep their order.
type lane struct {
	pub  *nats.Conn
	js   jetstream.JetStream // on pub
	sub  *nats.Conn
	cons jetstream.Consumer // on sub
	str  jetstream.Stream
}

type streamKey struct {
	ch  notify.Channel
	cat notify.Category
}

var (
	_ notify.Queue        = (*NotifyQueue)(nil)
	_ notify.QueueHorizon = (*NotifyQueue)(nil)
)

// NotifyQueue creates (or updates) the notification streams and consumers
// and returns the queue.
func (c *Conn) NotifyQueue(ctx context.Context, o NotifyOptions) (*NotifyQueue, error) {
	o.Partitions = cmp.Or(o.Partitions, 8)
	o.AckWait = cmp.Or(o.AckWait, 30*time.Second)
	o.Duplicates = cmp.Or(o.Duplicates, 2*time.Minute)
	workers := map[notify.Category]int{notify.Critical: 32, notify.Orders: 64, notify.Marketing: 64}
	for cat, n := range o.Workers {
		if n > 0 {
			workers[cat] = n
		}
	}
	o.Workers = workers
	log := cmp.Or(o.Logger, c.log)
	q := &NotifyQueue{c: c, o: o, log: log, lanes: map[streamKey]*lane{}}
	for _, ch := range notify.Channels {
		for _, cat := range notify.Categories {
			k := streamKey{ch, cat}
			l, err := q.openLane(ctx, k, workers[cat])
			if err != nil {
				q.Close()
				return nil, err
			}
			q.lanes[k] = l
		}
	}
	return q, nil
}

// openLane creates (or updates) k's stream and consumer and connects its
// lane. On error, what it connected is closed.
func (q *NotifyQueue) openLane(ctx context.Context, k streamKey, workers int) (_ *lane, err error) {
	l := &lane{}
	defer func() {
		if err != nil {
			_ = l.close() // l, not the nil the failed return hands back
		}
	}()
	if l.str, err = q.c.EnsureStream(ctx, jetstream.StreamConfig{
		Name:        q.streamName(k),
		Description: fmt.Sprintf("Sluice %s notifications on %s", k.cat, k.ch),
		Subjects:    []string{q.subjectBase(k) + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.WorkQueuePolicy,
		Duplicates:  q.o.Duplicates,
	}); err != nil {
		return nil, err
	}
	if err = ensureConsumer(ctx, l.str, jetstream.ConsumerConfig{
		Durable:       "workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       q.o.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 4 * workers * 8,
	}); err != nil {
		return nil, fmt.Errorf("queue: consumer of %s: %w", q.streamName(k), err)
	}
	name := strings.ToLower(string(k.ch) + "-" + string(k.cat))
	if l.pub, err = q.c.dial("notify-publish-" + name); err != nil {
		return nil, err
	}
	log := q.log
	if l.js, err = jetstream.New(l.pub,
		jetstream.WithPublishAsyncMaxPending(8192),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			log.Warn("publish not acknowledged; the recovery sweep will republish", "subject", m.Subject, logKeyError, err)
		})); err != nil {
		return nil, fmt.Errorf("queue: jetstream: %w", err)
	}
	// Consume through a connection of its own, so that fetching and
	// acknowledging never queue behind publishers.
	if l.sub, err = q.c.dial("notify-consume-" + name); err != nil {
		return nil, err
	}
	subJS, err := jetstream.New(l.sub)
	if err != nil {
		return nil, fmt.Errorf("queue: jetstream: %w", err)
	}
	if l.cons, err = subJS.Consumer(ctx, q.streamName(k), "workers"); err != nil {
		return nil, fmt.Errorf("queue: consumer of %s: %w", q.streamName(k), err)
	}
	return l, nil
}

// ensureConsumer creates the durable consumer cfg on s when it is missing
// and updates it only when its settings differ. Every node starts by
// calling this while other nodes may be pulling from the consumer, and an
// update of a consumer that has pull requests waiting is what we suspect
// of the stalls seen with NATS 2.9 (every node's pulls unanswered, see
// consume): a node that starts with the same settings changes nothing.
func ensureConsumer(ctx context.Context, s jetstream.Stream, cfg jetstream.ConsumerConfig) error {
	c, err := s.Consumer(ctx, cfg.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		_, err = s.CreateOrUpdateConsumer(ctx, cfg)
		return err
	case err != nil:
		return err
	}
	have := c.CachedInfo().Config
	if have.AckPolicy == cfg.AckPolicy && have.AckWait == cfg.AckWait && have.MaxDeliver == cfg.MaxDeliver &&
		have.MaxAckPending == cfg.MaxAckPending {
		return nil
	}
	_, err = s.CreateOrUpdateConsumer(ctx, cfg)
	return err
}

// close drains the lane's connections: pending publishes are sent.
func (l *lane) close() error {
	var errs []error
	for _, nc := range []*nats.Conn{l.pub, l.sub} {
		if nc != nil {
			if err := nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (q *NotifyQueue) streamName(k streamKey) string {
	return q.c.Name("NOTIFY_" + strings.ToUpper(string(k.ch)) + "_" + strings.ToUpper(string(k.cat)))
}

func (q *NotifyQueue) subjectBase(k streamKey) string {
	return q.c.Name("notify." + string(k.ch) + "." + string(k.cat))
}

// Subject returns the subject of j: its stream's base and the partition of
// its user.
func (q *NotifyQueue) Subject(j notify.Job) string {
	h := fnv.New32a()
	h.Write([]byte(j.UserID))
	return fmt.Sprintf("%s.%d", q.subjectBase(streamKey{j.Channel, j.Category}), h.Sum32()%uint32(q.o.Partitions))
}

// Publish implements notify.Queue. It returns once the job is handed to
// the connection; JetStream's acknowledgement arrives asynchronously, and
// a publish it refuses is logged (the recovery sweep republishes it).
// Nats-Msg-Id is j.MsgID().
func (q *NotifyQueue) Publish(ctx context.Context, j notify.Job) error {
	l, ok := q.lanes[streamKey{j.Channel, j.Category}]
	if !ok {
		return fmt.Errorf("queue: no stream for %s %s", j.Channel, j.Category)
	}
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("queue: encode job: %w", err)
	}
	msg := nats.NewMsg(q.Subject(j))
	msg.Data = data
	if q.o.Unconfirmed {
		msg.Header.Set(jetstream.MsgIDHeader, j.MsgID())
		if err := l.pub.PublishMsg(msg); err != nil {
			return fmt.Errorf("queue: publish %s: %w", j.MsgID(), err)
		}
		return nil
	}
	if _, err := l.js.PublishMsgAsync(msg, jetstream.WithMsgID(j.MsgID())); err != nil {
		return fmt.Errorf("queue: publish %s: %w", j.MsgID(), err)
	}
	return nil
}

// Close drains the queue's own connections: pending publishes are sent.
// Stop Run first.
func (q *NotifyQueue) Close() error {
	var errs []error
	for _, l := range q.lanes {
		errs = append(errs, l.close())
	}
	return errors.Join(errs...)
}

// Flush waits until every publish so far is acknowledged (unconfirmed:
// has reached the server), or ctx ends.
func (q *NotifyQueue) Flush(ctx context.Context) error {
	for _, l := range q.lanes {
		if q.o.Unconfirmed { // nothing to wait for but the server having them
			if err := flush(ctx, l.pub); err != nil {
				return fmt.Errorf("queue: flush: %w", err)
			}
			continue
		}
		select {
		case <-l.js.PublishAsyncComplete():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Horizon implements notify.QueueHorizon: the publish time of the oldest
// job in the stream (streams delete acknowledged jobs), or now when empty.
func (q *NotifyQueue) Horizon(ctx context.Context, ch notify.Channel, cat notify.Category) (time.Time, error) {
	l, ok := q.lanes[streamKey{ch, cat}]
	if !ok {
		return time.Time{}, fmt.Errorf("queue: no stream for %s %s", ch, cat)
	}
	info, err := l.str.Info(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("queue: stream info: %w", err)
	}
	if info.State.Msgs == 0 {
		return time.Now(), nil
	}
	m, err := l.str.GetMsg(ctx, info.State.FirstSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Now(), nil // acknowledged meanwhile
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("queue: oldest job: %w", err)
	}
	return m.Time, nil
}

// Handler processes one job; nil means done (acknowledge), an error means
// try again later.
type Handler func(ctx context.Context, j notify.Job) error

// Run consumes every stream, calling handle for each job, until ctx ends;
// then it stops fetching, lets the jobs in flight finish (their context is
// not cancelled), hands back the ones not started and returns.
func (q *NotifyQueue) Run(ctx context.Context, handle Handler) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(q.lanes))
	for k, l := range q.lanes {
		cons := l.cons
		wg.Go(func() {
			if err := q.consume(ctx, k, cons, handle); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func (q *NotifyQueue) consume(ctx context.Context, k streamKey, cons jetstream.Consumer, handle Handler) error {
	workers := q.o.Workers[k.cat]
	// Pull requests expire after 5 s (the client's default is 30 s) so that
	// a pull the server never fills (seen in CI on NATS 2.9 under load: a
	// stream stalled with jobs waiting until its pull expired) costs
	// seconds, not an OTP's whole budget. Idle streams re-pull every 5 s.
	pull := func() (jetstream.MessagesContext, error) {
		return cons.Messages(jetstream.PullMaxMessages(2*workers), jetstream.PullExpiry(5*time.Second))
	}
	it, err := pull()
	if err != nil {
		return fmt.Errorf("queue: consume %s: %w", q.streamName(k), err)
	}
	var itMu sync.Mutex // it is replaced when the server stops answering
	stop := context.AfterFunc(ctx, func() {
		itMu.Lock()
		defer itMu.Unlock()
		it.Stop()
	})
	defer stop()
	jobCtx := context.WithoutCancel(ctx)
	r := newKeyedRunner(workers, ctx.Done(), func(t task) { q.handleMsg(jobCtx, t, handle) })
	missed := 0 // heartbeats missed in a row
	for {
		itMu.Lock()
		cur := it
		itMu.Unlock()
		m, err := cur.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
				break
			}
			q.log.Warn("queue: fetch", "stream", q.streamName(k), logKeyError, err)
			if missed++; errors.Is(err, jetstream.ErrNoHeartbeat) && missed >= stalledAfter {
				// The server has answered none of our pulls for a while
				// (seen with NATS 2.9: every node's pulls on one consumer
				// unanswered while jobs waited). The client re-pulls on
				// its own after each miss; start over with a new
				// subscription as well.
				if next, perr := pull(); perr == nil {
					itMu.Lock()
					it.Stop()
					it = next
					itMu.Unlock()
					if ctx.Err() != nil {
						next.Stop()
					}
					missed = 0
				}
			}
			continue
		}
		missed = 0
		var j notify.Job
		if err := json.Unmarshal(m.Data(), &j); err != nil {
			q.log.Error("queue: dropping a malformed job", "stream", q.streamName(k), logKeyError, err)
			_ = m.Term()
			continue
		}
		if md, err := m.Metadata(); err != nil || md.NumDelivered > 1 {
			j.Redelivered = true
		}
		r.dispatch(task{job: j, msg: m})
	}
	r.close()
	return nil
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

// stalledAfter is how many heartbeats in a row a stream's pull may miss
// before consume replaces its subscription.
const stalledAfter = 3

func (q *NotifyQueue) handleMsg(ctx context.Context, t task, handle Handler) {
	if err := handle(ctx, t.job); err != nil {
		q.log.Warn("job failed; it will be delivered again", "job", t.job.MsgID(), logKeyError, err)
		_ = t.msg.NakWithDelay(2 * time.Second)
		return
	}
	if err := t.msg.Ack(); err != nil {
		q.log.Warn("ack failed; the job may run again", "job", t.job.MsgID(), logKeyError, err)
	}
}

// task is a fetched job and its message.
type task struct {
	job notify.Job
	msg jetstream.Msg
}

// keyedRunner runs tasks on a fixed pool of worker goroutines, with at most
// one task in flight per user, in arrival order per user. dispatch blocks
// while every worker is busy, which stops the fetch loop: back-pressure.
// The workers live as long as the runner, so their stacks, grown once by
// the deep store and provider calls, are not grown again for every job.
type keyedRunner struct {
	mu    sync.Mutex
	busy  map[string][]task // users in flight -> tasks waiting behind them
	ready chan task         // a user's next task, for any idle worker
	wg    sync.WaitGroup
	stop  <-chan struct{}
	run   func(task)
}

func newKeyedRunner(workers int, stop <-chan struct{}, run func(task)) *keyedRunner {
	r := &keyedRunner{busy: map[string][]task{}, ready: make(chan task), stop: stop, run: run}
	for range workers {
		r.wg.Go(r.work)
	}
	return r
}

func (r *keyedRunner) dispatch(t task) {
	r.mu.Lock()
	if waiting, ok := r.busy[t.job.UserID]; ok {
		r.busy[t.job.UserID] = append(waiting, t)
		r.mu.Unlock()
		return
	}
	r.busy[t.job.UserID] = nil
	r.mu.Unlock()
	r.ready <- t
}

// work runs a task, then that user's tasks that queued behind it, then
// waits for another user's.
func (r *keyedRunner) work() {
	for t := range r.ready {
		for {
			select {
			case <-r.stop: // shutting down: hand the job back at once
				_ = t.msg.Nak()
			default:
				r.run(t)
			}
			key := t.job.UserID
			r.mu.Lock()
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

// close waits for the tasks in flight and those queued behind them, then
// stops the workers. Call it after the last dispatch.
func (r *keyedRunner) close() {
	close(r.ready)
	r.wg.Wait()
}

// dial opens another connection to the same server as c, for traffic that
// should not queue behind c's: every *nats.Conn writes through one lock
// and, in process, one synchronous pipe, so publishers, acknowledgements
// and consumers on one connection wait for each other.
func (c *Conn) dial(name string) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("sluice-" + name),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.log.Error("nats async error", "connection", name, logKeyError, err)
		}),
	}
	var (
		nc  *nats.Conn
		err error
	)
	if c.srv != nil {
		nc, err = nats.Connect("", append(opts, nats.InProcessServer(c.srv))...)
	} else {
		nc, err = nats.Connect(c.opts.URL, append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(c.opts.ReconnectWait),
			nats.PingInterval(10*time.Second), nats.MaxPingsOutstanding(3),
			nats.Timeout(min(c.opts.ReadyTimeout, defaultConnectTimeout)))...)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: connect %s: %w", name, err)
	}
	return nc, nil
}
