// Package natsbus is the live link stats streams' adapter to NATS: a Bus
// publishes every recorded hit on a JetStream stream, which every node's
// Bus reads into its linklive.Hub and which keeps recent hits for a stream
// that reconnects (Last-Event-ID).
package natsbus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/linklive"
	"github.com/sluicehq/sluice/internal/shorten"
)

// DefaultMaxAge is how long the stream keeps hits for resuming streams
// (StreamConfig's maxAge when zero).
const DefaultMaxAge = 10 * time.Minute

// StreamConfig is the JetStream stream of every link's hits: name (e.g.
// "LINK_HITS"), subjects subject + ".<link id>", kept in memory for maxAge
// (default DefaultMaxAge) within 64 MiB, the oldest going first: a hit is
// worth something for a few minutes, and the clicks themselves are in the
// record store.
func StreamConfig(name, subject string, maxAge time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:      name,
		Subjects:  []string{subject + ".>"},
		MaxAge:    cmp.Or(maxAge, DefaultMaxAge),
		Storage:   jetstream.MemoryStorage,
		Discard:   jetstream.DiscardOld,
		MaxMsgs:   1_000_000,
		MaxBytes:  64 << 20,
		Retention: jetstream.LimitsPolicy,
	}
}

// perMessage bounds the hits of one message: a message carries one link's
// hits of one flush, and hit i of the message of stream sequence seq has
// the event id seq*perMessage + i, so ids stay integers that grow.
const perMessage = 1024

// message is what one NATS message carries: hits of one link.
type message struct {
	LinkID int64          `json:"link_id"`
	Hits   []linklive.Hit `json:"hits"`
}

// queued bounds the flushed batches waiting for the publisher; a flusher
// further ahead (NATS slow or down) loses hits to the live streams, never
// time.
const queued = 64

// Bus publishes recorded hits on a JetStream stream (StreamConfig) and
// reads every node's into a linklive.Hub. Publish hands batches to Run, which
// publishes them, so neither the click flusher nor a redirect ever waits
// on NATS. It is safe for concurrent use; the zero value is not usable
// (use NewBus).
type Bus struct {
	nc      *nats.Conn
	stream  jetstream.Stream
	subject string
	log     *slog.Logger
	batches chan []shorten.Click
	dropped atomic.Uint64
	failed  atomic.Bool // a publish failed; logged once until one succeeds
}

// NewBus returns a Bus publishing on nc to stream, whose subjects are
// subject + ".<link id>". A nil log discards.
func NewBus(nc *nats.Conn, stream jetstream.Stream, subject string, log *slog.Logger) *Bus {
	return &Bus{nc: nc, stream: stream, subject: subject, log: cmp.Or(log, slog.New(slog.DiscardHandler)),
		batches: make(chan []shorten.Click, queued)}
}

func (b *Bus) subjectOf(linkID int64) string { return b.subject + "." + strconv.FormatInt(linkID, 10) }

// Publish queues a recorded batch for Run to publish and never waits: it
// is shorten.Options.OnRecorded (which never changes a batch once handed
// over). When the queue is full the batch is dropped (Dropped counts its
// hits).
func (b *Bus) Publish(clicks []shorten.Click) {
	select {
	case b.batches <- clicks:
	default:
		b.dropped.Add(uint64(len(clicks)))
	}
}

// Dropped returns how many recorded hits Publish dropped, its queue full.
func (b *Bus) Dropped() uint64 { return b.dropped.Load() }

// Run publishes the queued batches until ctx ends, then those still
// queued, and returns ctx's error.
func (b *Bus) Run(ctx context.Context) error {
	for {
		select {
		case clicks := <-b.batches:
			b.send(clicks)
		case <-ctx.Done():
			for {
				select {
				case clicks := <-b.batches:
					b.send(clicks)
				default:
					_ = b.nc.Flush()
					return ctx.Err()
				}
			}
		}
	}
}

// send publishes one batch as one message per link (per perMessage hits):
// plain publishes, which the stream stores without acknowledging them.
func (b *Bus) send(clicks []shorten.Click) {
	byLink := map[int64][]linklive.Hit{}
	var order []int64
	for _, c := range clicks {
		if _, ok := byLink[c.LinkID]; !ok {
			order = append(order, c.LinkID)
		}
		byLink[c.LinkID] = append(byLink[c.LinkID], linklive.FromClick(c))
	}
	for _, id := range order {
		hits := byLink[id]
		for len(hits) > 0 {
			n := min(len(hits), perMessage)
			data, _ := json.Marshal(message{LinkID: id, Hits: hits[:n]})
			hits = hits[n:]
			if err := b.nc.Publish(b.subjectOf(id), data); err != nil {
				b.dropped.Add(uint64(n + len(hits)))
				if !b.failed.Swap(true) {
					b.log.Warn("publishing link hits to the live streams failed", "error", err)
				}
				break
			}
			b.failed.Store(false)
		}
	}
}

// Listen reads every link's hits published from its return on into hub,
// until stop is called, through an ordered consumer (recreated by the
// client when NATS restarts or a message is missed).
func (b *Bus) Listen(ctx context.Context, hub *linklive.Hub) (stop func(), err error) {
	return b.ListenFunc(ctx, hub.Receive)
}

// ListenFunc is Listen handing each hit to receive (a Hub's Receive,
// which cmd/sluice wraps to recover its panics), on the NATS client's
// goroutine.
func (b *Bus) ListenFunc(ctx context.Context, receive func(linklive.Hit)) (stop func(), err error) {
	cons, err := b.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.subject + ".>"}, DeliverPolicy: jetstream.DeliverNewPolicy,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("live link hits: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		for _, h := range decode(m) {
			receive(h)
		}
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		b.log.Debug("live link hits consumer", "error", err)
	}))
	if err != nil {
		return nil, fmt.Errorf("live link hits: %w", err)
	}
	return cc.Stop, nil
}

// decode reads one message's hits, with their event ids.
func decode(m jetstream.Msg) []linklive.Hit {
	meta, err := m.Metadata()
	if err != nil {
		return nil
	}
	var msg message
	if err := json.Unmarshal(m.Data(), &msg); err != nil || len(msg.Hits) > perMessage {
		return nil
	}
	for i := range msg.Hits {
		msg.Hits[i].LinkID = msg.LinkID
		msg.Hits[i].ID = meta.Sequence.Stream*perMessage + uint64(i)
	}
	return msg.Hits
}

// replayPage is what one fetch of Since asks for, in messages.
const replayPage = 64

// Since returns the hits of link after the event id after that the stream
// still keeps (its max age), oldest first, at most limit of them. It is
// linklive.Options.Replay.
func (b *Bus) Since(ctx context.Context, linkID int64, after uint64, limit int) ([]linklive.Hit, error) {
	cons, err := b.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{b.subjectOf(linkID)}, DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq: max(1, after/perMessage), InactiveThreshold: 10 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("replay link hits: %w", err)
	}
	defer func() {
		// The server would delete it once idle; a reconnecting crowd
		// should not leave one each behind meanwhile.
		if info := cons.CachedInfo(); info != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = b.stream.DeleteConsumer(dctx, info.Name)
			cancel()
		}
	}()
	var out []linklive.Hit
	for len(out) < limit {
		batch, err := cons.FetchNoWait(replayPage)
		if err != nil {
			return nil, fmt.Errorf("replay link hits: %w", err)
		}
		n, pending := 0, uint64(0)
		for m := range batch.Messages() {
			n++
			if meta, err := m.Metadata(); err == nil {
				pending = meta.NumPending
			}
			for _, h := range decode(m) {
				if h.ID > after && len(out) < limit {
					out = append(out, h)
				}
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("replay link hits: %w", err)
		}
		if n == 0 || pending == 0 {
			break
		}
	}
	return out, nil
}
