// Package inbox is the in-app channel of Sluice's notifications: each
// user's inbox of messages, stored per user, read and changed through the
// API, and pushed as they happen to the event streams (Server-Sent
// Events) a user holds open on any node.
//
// # Model
//
// A [Message] is one notification rendered for the inapp channel. The
// store numbers a user's messages 1, 2, 3... ([Message.Seq]) as they
// arrive; the number is the stream's event id, so a stream that
// reconnects with Last-Event-ID replays from the store exactly what it
// missed. A notification lands in an inbox at most once (the store keys
// messages by user and notification), so a retried delivery adds nothing.
//
// [Provider] hands the message to the notification worker, which stores
// it with the delivery's sent outcome in one write, and publishes an
// [Event] once that has committed ([Service.Stored]); [Service.Deliver]
// stores and publishes a message outside the pipeline. Changes of read
// state publish the user's new unread count. Publish is the
// cross-node seam (cmd/sluice posts events on a NATS subject every node
// listens to and hands what it hears to [Service.Receive]); each node
// fans events out to its own streams ([Service.Subscribe]), bounded per
// user and in total. Delivery to streams is best effort: a stream too slow
// to keep up is ended, and the client's reconnect with Last-Event-ID
// catches up from the store.
//
// [Provider] is the notify.Provider of the inapp channel. This is a domain
// package: it imports no infrastructure.
//
// # Tokens and their revocation
//
// Inbox tokens carry the generation of their user's tokens at the time
// they were minted, under their signature (internal/httpapi signs and
// checks them). Revoking a user's tokens bumps the stored generation, so
// every token minted before is refused and tokens minted after work.
//
// A node caches each user's generation for Options.TokenCacheTTL
// (tokens.go). A token of an older generation than the cached one is
// refused at once; a token of a newer one (minted after a revocation
// another node made) makes the node read the store again, so a new token
// works everywhere at once, and only a revoked token may still work, for
// at most TokenCacheTTL, on a node that has not yet read the revocation.
// The revoking node itself refuses it at once.
package inbox

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// Message is one message in a user's inbox.
type Message struct {
	// ID is the notification's id: unique in the user's inbox.
	ID     string `json:"id"`
	UserID string `json:"user_id"`
	// Seq numbers the user's messages from 1 in arrival order; it is the
	// message's event id on streams.
	Seq        int64           `json:"seq"`
	Type       string          `json:"type"`
	Category   string          `json:"category"`
	Subject    string          `json:"subject"`
	Body       string          `json:"body"`
	Data       json.RawMessage `json:"data,omitempty"` // the notification's data object, or nil
	CreatedAt  time.Time       `json:"created_at"`
	ReadAt     time.Time       `json:"read_at,omitzero"`     // zero while unread
	ArchivedAt time.Time       `json:"archived_at,omitzero"` // zero unless archived
}

// Action is a change of a message's state.
type Action string

// The actions on one message.
const (
	Read    Action = "read"
	Unread  Action = "unread"
	Archive Action = "archive"
)

// Valid reports whether a is a known action.
func (a Action) Valid() bool { return a == Read || a == Unread || a == Archive }

// Store keeps inboxes. Implementations are safe for concurrent use; the
// conformance suite in internal/store/storetest pins their behaviour.
type Store interface {
	// AddInboxMessage stores m under the next Seq of m.UserID and returns
	// it with its Seq, and added true. A message with the same UserID and
	// ID already stored is returned as stored, with added false.
	AddInboxMessage(ctx context.Context, m Message) (stored Message, added bool, err error)
	// InboxMessages returns up to limit of user's messages with Seq below
	// before (0: from the newest), newest first; archived ones only when
	// archived is true, and then only those.
	InboxMessages(ctx context.Context, user string, before int64, limit int, archived bool) ([]Message, error)
	// InboxMessagesAfter returns up to limit of user's messages with Seq
	// above after, oldest first, archived ones included (a stream
	// replays what it missed).
	InboxMessagesAfter(ctx context.Context, user string, after int64, limit int) ([]Message, error)
	// InboxUnread counts user's unread messages that are not archived.
	InboxUnread(ctx context.Context, user string) (int, error)
	// SetInboxState applies a to user's message id at at and returns the
	// message; apperr NotFound when there is none. Read keeps the first
	// read time; archiving also marks the message read.
	SetInboxState(ctx context.Context, user, id string, a Action, at time.Time) (Message, error)
	// MarkInboxRead marks every unread message of user read at at and
	// returns how many changed.
	MarkInboxRead(ctx context.Context, user string, at time.Time) (int, error)
	// InboxTokenGeneration returns user's inbox token generation: 0 until
	// the first RevokeInboxTokens.
	InboxTokenGeneration(ctx context.Context, user string) (int64, error)
	// RevokeInboxTokens bumps user's inbox token generation (recording
	// at) and returns the new one; each call bumps it once.
	RevokeInboxTokens(ctx context.Context, user string, at time.Time) (int64, error)
}

// Event kinds.
const (
	// KindMessage is a new message (with the unread count after it).
	KindMessage = "message"
	// KindUnread is a change of the unread count alone.
	KindUnread = "unread"
)

// Event is what streams receive: a new message, or a new unread count.
// It is also the cross-node wire format (JSON).
type Event struct {
	Kind    string   `json:"kind"`
	UserID  string   `json:"user"`
	Unread  int      `json:"unread"`
	Message *Message `json:"message,omitempty"`
	// At is when the event was published (Unix microseconds), for the
	// latency a stream reports.
	At int64 `json:"at"`

	payload *payload // set by Receive: one encoding shared by this node's streams
}

type payload struct {
	once sync.Once
	data []byte
}

// Payload returns encode(e), computed once for every stream e reaches on
// this node (a message to a user with many streams is encoded once, not
// once per stream).
func (e Event) Payload(encode func(Event) []byte) []byte {
	if e.payload == nil {
		return encode(e)
	}
	e.payload.once.Do(func() { e.payload.data = encode(e) })
	return e.payload.data
}
