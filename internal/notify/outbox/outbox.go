// Package outbox is Sluice's built-in provider: instead of calling an
// outside service it records each message in the record store, where the
// API (GET /v1/outbox) and the dashboard show it. It is the default for
// every channel until a real provider is configured, so every feature can
// be tried with curl and no accounts anywhere.
//
// The provider writes nothing itself: it returns the entry in its receipt
// (notify.Receipt.Outbox) and the worker stores it in the transaction that
// records the delivery as sent. An entry is keyed by notification, channel
// and attempt number, so a job redelivered after a crash records nothing
// new: the outbox receives each attempt exactly once.
//
// [Provider] is a notify.Provider for any channel.
package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// Provider hands each message back as an outbox entry for the worker to
// store. It is safe for concurrent use.
type Provider struct {
	// Now is the clock. If nil, time.Now.
	Now func() time.Time
}

var (
	_ notify.Provider     = (*Provider)(nil)
	_ notify.StoredSender = (*Provider)(nil)
)

// Name implements notify.Provider.
func (p *Provider) Name() string { return "outbox" }

// NeedsContact implements notify.Provider: the outbox needs no address.
func (p *Provider) NeedsContact() bool { return false }

// Send implements notify.Provider. It cannot fail: the entry is stored
// with the attempt's outcome, and a failure there retries the attempt.
func (p *Provider) Send(_ context.Context, m notify.Message) (notify.Receipt, error) {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	to := m.To
	if to == "" {
		to = m.UserID
	}
	e := &notify.OutboxEntry{NotificationID: m.NotificationID, Channel: m.Channel, Attempt: m.Attempt, UserID: m.UserID,
		To: to, Subject: m.Subject, Body: m.Body, HTML: m.HTML, CreatedAt: now()}
	return notify.Receipt{ProviderMessageID: fmt.Sprintf("%s:%d", m.IdempotencyKey, m.Attempt), Outbox: e}, nil
}

// SendsInStore implements notify.StoredSender: sending is the entry the
// worker stores with the outcome, so the worker claims nothing first.
func (p *Provider) SendsInStore() bool { return true }
