// Package outbox is Sluice's built-in provider: instead of calling an
// outside service it records each message in the record store, where the
// API (GET /v1/outbox) and the dashboard show it. It is the default for
// every channel until a real provider is configured, so every feature can
// be tried with curl and no accounts anywhere.
//
// An entry is keyed by notification, channel and attempt number, so a job
// redelivered after a crash records nothing new: the outbox receives each
// attempt exactly once.
package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// Entry is one message the outbox received.
type Entry struct {
	NotificationID string
	Channel        notify.Channel
	Attempt        int
	UserID         string
	To             string // the user's address on the channel, or the user id when unknown
	Subject        string
	Body           string
	CreatedAt      time.Time
}

// Filter narrows a listing; zero fields match everything.
type Filter struct {
	UserID         string
	NotificationID string
}

// Store keeps entries; internal/store implements it.
type Store interface {
	// AddOutboxEntry records e unless an entry with the same notification,
	// channel and attempt exists (then it does nothing and succeeds).
	AddOutboxEntry(ctx context.Context, e Entry) error
	// OutboxEntries returns up to limit entries matching f, newest first
	// (created_at, then notification id and channel, descending), strictly
	// after the cursor when it is not zero.
	OutboxEntries(ctx context.Context, f Filter, after notify.Cursor, limit int) ([]Entry, error)
}

// Provider records messages in a Store. It is safe for concurrent use.
type Provider struct {
	Store Store
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
}

var _ notify.Provider = (*Provider)(nil)

// Name implements notify.Provider.
func (p *Provider) Name() string { return "outbox" }

// NeedsContact implements notify.Provider: the outbox needs no address.
func (p *Provider) NeedsContact() bool { return false }

// Send implements notify.Provider.
func (p *Provider) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	to := m.To
	if to == "" {
		to = m.UserID
	}
	e := Entry{NotificationID: m.NotificationID, Channel: m.Channel, Attempt: m.Attempt, UserID: m.UserID,
		To: to, Subject: m.Subject, Body: m.Body, CreatedAt: now()}
	if err := p.Store.AddOutboxEntry(ctx, e); err != nil {
		return notify.Receipt{}, notify.Temporary(fmt.Errorf("outbox: %w", err), 0)
	}
	return notify.Receipt{ProviderMessageID: fmt.Sprintf("%s:%d", m.IdempotencyKey, m.Attempt)}, nil
}
