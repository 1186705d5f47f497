package inbox

import (
	"context"
	"strconv"

	"github.com/sluicehq/sluice/internal/notify"
)

// Provider is the notify.Provider of the inapp channel: sending is
// storing the message in the user's inbox and publishing it to the
// user's streams. A store failure is temporary (the worker retries); a
// retried attempt finds the message stored and adds nothing.
type Provider struct {
	Inbox *Service
}

var (
	_ notify.Provider     = (*Provider)(nil)
	_ notify.StoredSender = (*Provider)(nil)
)

// Name implements notify.Provider.
func (p *Provider) Name() string { return "inbox" }

// NeedsContact implements notify.Provider: an inbox needs no address.
func (p *Provider) NeedsContact() bool { return false }

// Send implements notify.Provider.
func (p *Provider) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	stored, err := p.Inbox.Deliver(ctx, Message{ID: m.NotificationID, UserID: m.UserID, Type: m.Type,
		Category: string(m.Category), Subject: m.Subject, Body: m.Body, Data: m.Data})
	if err != nil {
		return notify.Receipt{}, notify.Temporary(err, 0)
	}
	return notify.Receipt{ProviderMessageID: m.UserID + ":" + strconv.FormatInt(stored.Seq, 10)}, nil
}

// SendsInStore implements notify.StoredSender: sending is a write to the
// record store that a repeated attempt cannot double (the inbox keys
// messages by notification), so the worker claims nothing first and a
// delivery costs one write fewer.
func (p *Provider) SendsInStore() bool { return true }
