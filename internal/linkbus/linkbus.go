// Package linkbus announces deleted short links between Sluice nodes over
// core NATS, so that every node drops the code from its in-process cache
// at once instead of redirecting it until the entry's TTL
// (links.cache_ttl) runs out. A message carries the code and nothing else.
//
// Delivery is best effort, and that is enough: a lost message costs what
// no announcement would (the TTL still bounds how long a node redirects a
// deleted link), a duplicate costs one cache miss. Every node, including
// the sender, drops the code when the message arrives.
//
// It is a sibling of package rulebus rather than a generalization of it:
// the two differ in what a message carries and in what announcing waits
// for (a rule change waits for the server; a delete does not wait at all).
package linkbus

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// Bus publishes and receives link deletion announcements on one subject.
// It is safe for concurrent use; the zero value is not usable (use New).
type Bus struct {
	nc      *nats.Conn
	subject string
}

// New returns a Bus on subject (Sluice uses queue.Conn.Name of
// "links.deleted", so tests sharing a server stay apart).
func New(nc *nats.Conn, subject string) *Bus { return &Bus{nc: nc, subject: subject} }

// Announce tells every listening node that the link with code was deleted.
// It never waits on the network, so a DELETE request is never slowed by
// NATS: the message leaves with the connection's next write, or, while the
// client is reconnecting, from its reconnect buffer once it is back. It
// fails only when the message cannot even be queued (connection closed,
// reconnect buffer full).
func (b *Bus) Announce(code string) error {
	if err := b.nc.Publish(b.subject, []byte(code)); err != nil {
		return fmt.Errorf("announce deleted link %q: %w", code, err)
	}
	return nil
}

// Listen calls deleted with the code of every announced deletion (from a
// NATS goroutine; it must not block) until stop is called. Empty messages
// are ignored.
func (b *Bus) Listen(deleted func(code string)) (stop func() error, err error) {
	sub, err := b.nc.Subscribe(b.subject, func(m *nats.Msg) {
		if len(m.Data) > 0 {
			deleted(string(m.Data))
		}
	})
	if err != nil {
		return nil, fmt.Errorf("listen for deleted links: %w", err)
	}
	if err := b.nc.Flush(); err != nil { // the subscription is live on the server before we return
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("listen for deleted links: %w", err)
	}
	return sub.Unsubscribe, nil
}
