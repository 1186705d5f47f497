package notify

import (
	"encoding/json"
	"time"
)

// InboxEntry is a message for a user's in-app inbox (package inbox), handed
// by the inapp provider to the worker in Receipt.Inbox and stored with the
// attempt's sent outcome, like an OutboxEntry: the message and the sent
// status are saved together or not at all, and a delivery costs one write.
type InboxEntry struct {
	NotificationID string // the message's id: a notification lands in an inbox at most once
	UserID         string
	Type           string
	Category       Category
	Subject        string
	Body           string
	Data           json.RawMessage // the notification's data object, or nil
	CreatedAt      time.Time
	// Seq is set by Store.FinishAttempt when it stores the outcome: the
	// message's number in the user's inbox (the number it already had when
	// the inbox held it).
	Seq int64
}
