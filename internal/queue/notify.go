package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
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
	// delivers it again. If zero, 30 seconds; critical streams use at
	// most 3 seconds, so a dead node's OTPs come back within their budget.
	AckWait time.Duration
	// Duplicates is JetStream's deduplication window for Nats-Msg-Id.
	// If zero, 2 minutes.
	Duplicates time.Duration
	// Workers is the number of jobs handled at once per stream, per
	// category. Missing categories get critical 32, orders 64, marketing 64.
	Workers map[notify.Category]int
	// BusyCriticalWorkers is how many jobs of the other categories a node
	// starts at once, across its lanes, while it holds a critical job (see
	// priorityGate). If zero, GOMAXPROCS.
	BusyCriticalWorkers int
	// Unconfirmed publishes jobs without JetStream's acknowledgement (core
	// NATS publishes to the streams' subjects, still deduplicated by
	// Nats-Msg-Id). A job the server loses is then noticed only by the
	// recovery sweep, after its threshold, instead of being logged at once;
	// in exchange each job costs one message fewer, and the node accepts
	// more notifications per second (measured in docs/benchmarks.md,
	// "Single POSTs").
	Unconfirmed bool
	// Logger receives consumer errors. If nil, nothing is logged.
	Logger *slog.Logger
}

// NotifyQueue is the notification pipeline's queue: one JetStream stream
// per channel x category (NOTIFY_EMAIL_CRITICAL takes the subjects
// notify.email.critical.<partition>), each with its own consumers and its
// own workers, so a backlog of marketing jobs never sits in front of a
// critical one.
//
// Ordering: JetStream hands a consumer's jobs out in publish order, and
// NotifyQueue runs at most one job per user at a time within a stream, in
// that order (a user's later jobs wait behind the one in flight; other
// users' jobs do not). So on one node one user's messages on one channel
// are attempted in the order they were accepted. Across nodes, on NATS
// 2.11 and later, each partition of a stream has a consumer of its own
// with a pinned-client priority group: the server hands a partition to one
// node at a time, and to another only when that node stops pulling
// (pinnedTTL) or hands it back on shutdown, so the order holds across
// every node consuming the queue. The nodes running the queue share the
// partitions of each stream out among themselves, at most
// ceil(partitions/nodes) each, and move partitions when a node joins or
// leaves (see Sharing partitions out in the package doc), so delivery work spreads over the nodes. On
// older servers (detected from the server's INFO) the streams keep one
// shared consumer and the order holds per node only: two jobs of one user
// may run at once on two nodes.
// Retries trade the order away on purpose: a failed attempt is
// acknowledged and republished when its backoff is due, so the user's
// later messages may overtake it instead of stalling behind a provider
// outage.
//
// Every job a node holds is kept alive with in-progress acknowledgements
// (see keyedRunner), so AckWait bounds how long a job stays with a node
// that died, not how long a live node may take.
//
// Streams use work-queue retention: an acknowledged job is deleted, so
// the first message of a stream is the oldest job not yet handled, which
// Horizon reports to the recovery sweep.
type NotifyQueue struct {
	c      *Conn
	o      NotifyOptions
	log    *slog.Logger
	lanes  map[streamKey]*lane
	pinned bool // per-partition consumers with a pinned client (NATS 2.11+)
}

// lane is one stream and the two connections of its own that publish to
// it and consume from it. A NATS connection is one lock and, on the
// server, one goroutine that handles its messages in turn, so with one
// connection for every stream, publishes and acknowledgements of all
// streams waited for each other (under load, dozens of requests queued on
// the publishing connection's lock). Per stream, they run in parallel,
// and one stream's publishes still keep their order.
type lane struct {
	key     streamKey
	index   int // in notify.Channels x notify.Categories, the same on every node
	workers int
	pub     *nats.Conn
	js      jetstream.JetStream // on pub
	sub     *nats.Conn
	subJS   jetstream.JetStream // on sub
	str     jetstream.Stream    // on the Conn's own connection
	// consumers are the stream's consumers: one per partition when pinned,
	// else one.
	consumers []jetstream.ConsumerConfig
	// holds[i] is set while this node pulls from consumers[i] or still
	// holds jobs of it (see partition).
	holds []atomic.Bool
	// received[i] counts the jobs this node received from consumers[i].
	received []atomic.Int64
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
	o.BusyCriticalWorkers = cmp.Or(o.BusyCriticalWorkers, runtime.GOMAXPROCS(0))
	workers := map[notify.Category]int{notify.Critical: 32, notify.Orders: 64, notify.Marketing: 64}
	for cat, n := range o.Workers {
		if n > 0 {
			workers[cat] = n
		}
	}
	o.Workers = workers
	log := cmp.Or(o.Logger, c.log)
	q := &NotifyQueue{c: c, o: o, log: log, lanes: map[streamKey]*lane{}}
	version := c.nc.ConnectedServerVersion()
	if q.pinned = pinningSupported(version); !q.pinned {
		log.Warn("NATS server predates 2.11 (no pinned consumers): one user's notifications keep their order on each node, not across nodes",
			"server_version", version)
	}
	for _, ch := range notify.Channels {
		for _, cat := range notify.Categories {
			k := streamKey{ch, cat}
			l, err := q.openLane(ctx, k, workers[cat])
			if err != nil {
				q.Close()
				return nil, err
			}
			l.index = len(q.lanes)
			q.lanes[k] = l
		}
	}
	return q, nil
}

// openLane creates (or updates) k's stream and consumers and connects its
// lane. On error, what it connected is closed.
func (q *NotifyQueue) openLane(ctx context.Context, k streamKey, workers int) (_ *lane, err error) {
	l := &lane{key: k, workers: workers}
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
	l.consumers = q.consumerConfigs(k, workers)
	l.holds = make([]atomic.Bool, len(l.consumers))
	l.received = make([]atomic.Int64, len(l.consumers))
	// A stream just created in a cluster may not be known yet to the
	// server answering its consumer calls ("stream not found"): ask again
	// for a few seconds.
	for wait := 50 * time.Millisecond; ; wait *= 2 {
		err = q.ensureConsumers(ctx, l)
		if err == nil || !errors.Is(err, jetstream.ErrStreamNotFound) || wait > 2*time.Second {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queue: consumers of %s: %w", q.streamName(k), err)
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
	if l.subJS, err = jetstream.New(l.sub); err != nil {
		return nil, fmt.Errorf("queue: jetstream: %w", err)
	}
	return l, nil
}

// Consumer layout. pinGroup is the priority group every node pulls in;
// pinnedTTL is how long a partition stays with a node that stopped
// pulling (a live node pulls at least every pullExpiry) before the server
// hands it to another.
const (
	consumerName = "workers" // the shared consumer, and the partition consumers' prefix
	pinGroup     = "sluice"
	pinnedTTL    = 15 * time.Second
	// criticalAckWait caps the ack wait of critical streams: the jobs a
	// node held when it died come back to the others this long after its
	// last in-progress acknowledgement (sent every third of it), within an
	// OTP's budget.
	criticalAckWait = 3 * time.Second
)

// consumerConfigs returns the consumers of k's stream: one per partition
// with a pinned client when the server has priority groups, else one
// shared consumer. Each partition consumer may hold 4 x workers jobs
// unacknowledged, so a stream's partitions together hold as many as the
// shared consumer.
func (q *NotifyQueue) consumerConfigs(k streamKey, workers int) []jetstream.ConsumerConfig {
	ackWait := q.o.AckWait
	if k.cat == notify.Critical {
		ackWait = min(ackWait, criticalAckWait)
	}
	base := jetstream.ConsumerConfig{
		AckPolicy:  jetstream.AckExplicitPolicy,
		AckWait:    ackWait,
		MaxDeliver: -1,
		// Zero: as many as the stream. When the stream's replicas change,
		// the server moves the consumers along (a consumer with more
		// replicas than its stream has peers yet is refused).
		Replicas: 0,
	}
	if !q.pinned {
		base.Durable, base.MaxAckPending = consumerName, 4*workers*q.o.Partitions
		return []jetstream.ConsumerConfig{base}
	}
	out := make([]jetstream.ConsumerConfig, q.o.Partitions)
	for p := range out {
		c := base
		c.Durable = fmt.Sprintf("%s_%d", consumerName, p)
		c.FilterSubject = fmt.Sprintf("%s.%d", q.subjectBase(k), p)
		c.MaxAckPending = 4 * workers
		c.PriorityPolicy = jetstream.PriorityPolicyPinned
		c.PriorityGroups = []string{pinGroup}
		c.PinnedTTL = pinnedTTL
		out[p] = c
	}
	return out
}

// ensureConsumers makes l's stream have exactly l.consumers among
// Sluice's consumers: it deletes those of the other layout (a work-queue
// stream refuses consumers whose subjects overlap: the shared consumer and
// the partition consumers cannot live side by side, nor partitions of an
// older partition count), then creates or updates each one.
func (q *NotifyQueue) ensureConsumers(ctx context.Context, l *lane) error {
	want := map[string]bool{}
	for _, c := range l.consumers {
		want[c.Durable] = true
	}
	names := l.str.ConsumerNames(ctx)
	var stale []string
	for name := range names.Name() {
		if strings.HasPrefix(name, consumerName) && !want[name] {
			stale = append(stale, name)
		}
	}
	if err := names.Err(); err != nil {
		return err
	}
	for _, name := range stale {
		q.log.Info("queue: deleting a consumer of another layout", "stream", q.streamName(l.key), "consumer", name)
		if err := l.str.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return err
		}
	}
	for _, c := range l.consumers {
		if err := ensureConsumer(ctx, l.str, c); err != nil {
			return fmt.Errorf("%s: %w", c.Durable, err)
		}
	}
	return nil
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
	if sameConsumer(c.CachedInfo().Config, cfg) {
		return nil
	}
	_, err = s.CreateOrUpdateConsumer(ctx, cfg)
	return err
}

// sameConsumer reports whether the consumer have has the settings of want
// that Sluice sets.
func sameConsumer(have, want jetstream.ConsumerConfig) bool {
	return have.AckPolicy == want.AckPolicy && have.AckWait == want.AckWait && have.MaxDeliver == want.MaxDeliver &&
		have.MaxAckPending == want.MaxAckPending && have.FilterSubject == want.FilterSubject &&
		have.Replicas == want.Replicas && have.PriorityPolicy == want.PriorityPolicy &&
		have.PinnedTTL == want.PinnedTTL && slices.Equal(have.PriorityGroups, want.PriorityGroups)
}

// pinningSupported reports whether a server of this version ("2.11.4")
// has priority groups with pinned clients, which came with NATS 2.11.
func pinningSupported(version string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 2 || major == 2 && minor >= 11
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

var _ notify.QueueConfirmer = (*NotifyQueue)(nil)

// Confirming publishes. PublishConfirmed waits confirmAck for a job's
// acknowledgement, publishes it again (the same Nats-Msg-Id: never twice
// in the stream) after a pause doubling from confirmPause, and gives up
// after confirmFor: long enough for an R3 stream to elect a new leader
// when its leader's server dies. While the connection is down it gives
// up after confirmOffline instead: long enough to reconnect to another
// server of a cluster, short enough that NATS down as a whole does not
// hold every request for long (pending acknowledgements fail on a
// disconnect, and such a job may be lost with the server).
const (
	confirmAck     = 2 * time.Second
	confirmPause   = 50 * time.Millisecond
	confirmFor     = 10 * time.Second
	confirmOffline = 3 * time.Second
)

// PublishConfirmed implements notify.QueueConfirmer: it publishes jobs
// and returns once JetStream has acknowledged every one, publishing those
// it refused or did not acknowledge again until confirmFor has passed
// (then the error of the last failure; the recovery sweep republishes
// those). A notification's jobs are thus in their streams before it is
// answered 202, so a request sent after that answer is queued after them
// even while a NATS server dies. While the connection is down it tries
// for confirmOffline only. With Unconfirmed it is Publish for each.
func (q *NotifyQueue) PublishConfirmed(ctx context.Context, jobs []notify.Job) error {
	if q.o.Unconfirmed {
		var errs []error
		for _, j := range jobs {
			errs = append(errs, q.Publish(ctx, j))
		}
		return errors.Join(errs...)
	}
	began, pause := time.Now(), confirmPause
	pending := jobs
	for {
		futures := make([]jetstream.PubAckFuture, len(pending))
		errs := make([]error, len(pending))
		online := true
		for i, j := range pending {
			var up bool
			futures[i], up, errs[i] = q.publishAsync(j)
			online = online && up
		}
		var failed []notify.Job
		var last error
		for i, f := range futures {
			if errs[i] == nil {
				select {
				case <-f.Ok():
				case errs[i] = <-f.Err():
				case <-time.After(confirmAck):
					errs[i] = fmt.Errorf("queue: publish %s: no acknowledgement within %s", pending[i].MsgID(), confirmAck)
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if errs[i] != nil {
				failed, last = append(failed, pending[i]), errs[i]
			}
		}
		if len(failed) == 0 {
			return nil
		}
		limit := confirmFor
		if !online {
			limit = confirmOffline
		}
		if time.Since(began)+pause > limit {
			return last
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pending, pause = failed, min(2*pause, time.Second)
	}
}

// publishAsync publishes j to its stream with JetStream's acknowledgement
// to come, and reports whether the connection was up (else the job waits
// in the reconnect buffer).
func (q *NotifyQueue) publishAsync(j notify.Job) (jetstream.PubAckFuture, bool, error) {
	l, ok := q.lanes[streamKey{j.Channel, j.Category}]
	if !ok {
		return nil, false, fmt.Errorf("queue: no stream for %s %s", j.Channel, j.Category)
	}
	data, err := json.Marshal(j)
	if err != nil {
		return nil, false, fmt.Errorf("queue: encode job: %w", err)
	}
	msg := nats.NewMsg(q.Subject(j))
	msg.Data = data
	connected := l.pub.IsConnected()
	f, err := l.js.PublishMsgAsync(msg, jetstream.WithMsgID(j.MsgID()))
	if err != nil {
		return nil, false, fmt.Errorf("queue: publish %s: %w", j.MsgID(), err)
	}
	return f, connected && l.pub.IsConnected(), nil
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
