// Package rulebus announces rate limit rule changes between Sluice nodes
// over core NATS: the push half of the rules cache's freshness (the
// periodic reload is the other half). A message carries no data; it only
// says "reload now", so a lost or duplicated one costs nothing but a
// reload, and every node, including the sender, simply reloads.
package rulebus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
)

// Bus publishes and receives rule change announcements on one subject. It
// is safe for concurrent use; the zero value is not usable (use New).
type Bus struct {
	nc      *nats.Conn
	subject string
}

// New returns a Bus on subject (Sluice uses queue.Conn.Name of
// "ratelimit.rules.changed", so tests sharing a server stay apart).
func New(nc *nats.Conn, subject string) *Bus { return &Bus{nc: nc, subject: subject} }

// Announce tells every listening node that the rules changed. It returns
// once the server has the message, or ctx ends.
func (b *Bus) Announce(ctx context.Context) error {
	if err := b.nc.Publish(b.subject, nil); err != nil {
		return fmt.Errorf("announce rule change: %w", err)
	}
	if err := b.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("announce rule change: %w", err)
	}
	return nil
}

// Listen calls changed (from a NATS goroutine; it must not block) for
// every announcement until stop is called.
func (b *Bus) Listen(changed func()) (stop func() error, err error) {
	sub, err := b.nc.Subscribe(b.subject, func(*nats.Msg) { changed() })
	if err != nil {
		return nil, fmt.Errorf("listen for rule changes: %w", err)
	}
	if err := b.nc.Flush(); err != nil { // the subscription is live on the server before we return
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("listen for rule changes: %w", err)
	}
	return sub.Unsubscribe, nil
}
