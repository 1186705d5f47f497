package notify

import (
	"context"
	"strconv"
	"time"
)

// OutboxEntry is one message the built-in outbox received: the sent
// attempt of one delivery (a notification on a channel), which holds at
// most one.
type OutboxEntry struct {
	NotificationID string
	Channel        Channel
	Attempt        int
	UserID         string
	To             string // the user's address on the channel, or the user id when unknown
	Subject        string
	Body           string
	HTML           string // an email's HTML part, "" for none
	CreatedAt      time.Time
}

// CursorID is the entry's id in a Cursor: "notification_id:channel:attempt".
func (e OutboxEntry) CursorID() string {
	return e.NotificationID + ":" + string(e.Channel) + ":" + strconv.Itoa(e.Attempt)
}

// OutboxFilter narrows a listing of the outbox. The zero value matches
// every entry; each field set must match.
type OutboxFilter struct {
	UserID         string
	NotificationID string
}

// Outbox returns a page of what the built-in outbox received, newest
// first, matching f, and the cursor of the next page ("" at the end). A
// limit of 0 or less asks for DefaultPageSize entries; more than
// MaxPageSize asks for MaxPageSize.
func (s *Service) Outbox(ctx context.Context, f OutboxFilter, cursor string, limit int) ([]OutboxEntry, string, error) {
	return page(cursor, limit, func(c Cursor, n int) ([]OutboxEntry, error) {
		return s.opts.Store.OutboxEntries(ctx, f, c, n)
	}, func(e OutboxEntry) Cursor { return Cursor{At: e.CreatedAt, ID: e.CursorID()} })
}
