package inbox

import (
	"context"

	"github.com/sluicehq/sluice/internal/notify"
)

// Provider is the notify.Provider of the inapp channel: sending is
// storing the message in the user's inbox and publishing it to the
// user's streams. Send writes nothing: it hands the message to the worker
// as Receipt.Inbox, which the store saves in the same transaction as the
// attempt's sent outcome (one group-committed write per delivery), and the
// event is published once that has committed (Receipt.Committed).
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
func (p *Provider) Send(_ context.Context, m notify.Message) (notify.Receipt, error) {
	e := &notify.InboxEntry{NotificationID: m.NotificationID, UserID: m.UserID, Type: m.Type, Category: m.Category,
		Subject: m.Subject, Body: m.Body, Data: m.Data, CreatedAt: p.Inbox.opts.Now()}
	return notify.Receipt{Inbox: e, Committed: func(ctx context.Context) {
		p.Inbox.Stored(ctx, Message{ID: e.NotificationID, UserID: e.UserID, Seq: e.Seq, Type: e.Type,
			Category: string(e.Category), Subject: e.Subject, Body: e.Body, Data: e.Data, CreatedAt: e.CreatedAt})
	}}, nil
}

// SendsInStore implements notify.StoredSender: sending is a row stored with
// the outcome, which a repeated attempt cannot double (the outcome's write
// applies once per attempt, and the inbox keys messages by notification),
// so the worker claims nothing first.
func (p *Provider) SendsInStore() bool { return true }
