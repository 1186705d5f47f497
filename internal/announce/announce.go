// Package announce sends small announcements between Sluice nodes over
// core NATS: "the rate limit rules changed, reload them", "this key was
// reset, forget its remembered refusal" and "this short link was deleted,
// drop it from your cache". Each is the push half of a
// cache's freshness; the cache's own expiry (a periodic reload, a TTL) is
// the other half, so delivery is best effort: a lost announcement costs
// what no announcement would, a duplicate costs one reload or one cache
// miss. Every node listening, the sender included, receives each one
// (ListenOthers leaves out the sender's own).
//
// It is a NATS adapter for two domains: the rate limit service
// (limits.Options.Announce) and the shortener (shorten.Options.Announce).
package announce

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// Bus publishes and receives announcements on one subject. It is safe for
// concurrent use; the zero value is not usable (use New).
type Bus struct {
	nc      *nats.Conn
	subject string
	origin  string // names this Bus's own posts, so ListenOthers can skip them
}

// New returns a Bus on subject. Sluice names subjects with queue.Conn.Name
// ("ratelimit.rules.changed", "links.deleted"), so tests sharing a server
// stay apart.
func New(nc *nats.Conn, subject string) *Bus {
	return &Bus{nc: nc, subject: subject, origin: nats.NewInbox()}
}

// originHeader carries the posting Bus's origin.
const originHeader = "Sluice-Origin"

// Signal announces an event that carries no data, and returns once the
// server has it, or ctx ends.
func (b *Bus) Signal(ctx context.Context) error { return b.Send(ctx, nil) }

// Send announces data and returns once the server has it, or ctx ends.
// Rate limit changes use it: the API call that changed a rule or reset a
// key answers after the other nodes can know.
func (b *Bus) Send(ctx context.Context, data []byte) error {
	if err := b.nc.Publish(b.subject, data); err != nil {
		return fmt.Errorf("announce on %s: %w", b.subject, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		// nats.go refuses to flush without a deadline (API handlers
		// passed their request's context, which has none: every
		// announcement of a rule change was reported as failed).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	if err := b.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("announce on %s: %w", b.subject, err)
	}
	return nil
}

// Post announces data and never waits on the network: the message leaves
// with the connection's next write or, while the client reconnects, from
// its reconnect buffer. It fails only when the message cannot even be
// queued (connection closed, reconnect buffer full). Link deletes use it,
// so a DELETE is never slowed by NATS.
func (b *Bus) Post(data string) error {
	m := &nats.Msg{Subject: b.subject, Data: []byte(data), Header: nats.Header{originHeader: []string{b.origin}}}
	if err := b.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("announce on %s: %w", b.subject, err)
	}
	return nil
}

// Listen calls heard with the data of every announcement (from a NATS
// goroutine; it must not block) until stop is called.
func (b *Bus) Listen(heard func(data string)) (stop func() error, err error) {
	return b.listen(func(m *nats.Msg) { heard(string(m.Data)) })
}

// ListenOthers is Listen without this Bus's own posts. A node that has
// already applied its change must not apply it again when its own
// announcement comes back late: a link created and then given rules
// would otherwise be cached again without them when the creation's
// announcement arrived after the rules were set.
func (b *Bus) ListenOthers(heard func(data string)) (stop func() error, err error) {
	return b.listen(func(m *nats.Msg) {
		if m.Header.Get(originHeader) != b.origin {
			heard(string(m.Data))
		}
	})
}

func (b *Bus) listen(h nats.MsgHandler) (stop func() error, err error) {
	sub, err := b.nc.Subscribe(b.subject, h)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", b.subject, err)
	}
	if err := b.nc.Flush(); err != nil { // the subscription is live on the server before we return
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("listen on %s: %w", b.subject, err)
	}
	return sub.Unsubscribe, nil
}
