package notify

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Category decides a notification's priority queue, retry rule and whether
// users may mute it.
type Category string

// The three categories, most urgent first.
const (
	Critical  Category = "critical"
	Orders    Category = "orders"
	Marketing Category = "marketing"
)

// Categories lists every category, most urgent first.
var Categories = []Category{Critical, Orders, Marketing}

// Valid reports whether c is a known category.
func (c Category) Valid() bool { return slices.Contains(Categories, c) }

// Urgent reports whether c's writes go ahead of others' in a store that
// queues writes (the group commit): a critical notification's, so a
// campaign's backlog of writes does not delay an OTP.
func (c Category) Urgent() bool { return c == Critical }

// Channel is a way of reaching a person.
type Channel string

// The channels a notification can go out on.
const (
	Email   Channel = "email"
	SMS     Channel = "sms"
	Push    Channel = "push"
	Webhook Channel = "webhook"
	// InApp stores the message in the user's inbox (package inbox), read
	// through the API and pushed to open event streams.
	InApp Channel = "inapp"
)

// Channels lists every channel in the order deliveries are shown.
var Channels = []Channel{Email, SMS, Push, Webhook, InApp}

// Valid reports whether ch is a known channel.
func (ch Channel) Valid() bool { return slices.Contains(Channels, ch) }

// Status is a delivery's state.
type Status string

// Delivery states. A delivery is saved queued (or suppressed) and moves to
// exactly one terminal state; queued is also where it waits between
// retries.
const (
	StatusQueued     Status = "queued"
	StatusSending    Status = "sending"
	StatusSent       Status = "sent"
	StatusDelivered  Status = "delivered"
	StatusFailed     Status = "failed"
	StatusExpired    Status = "expired"
	StatusDead       Status = "dead"
	StatusSuppressed Status = "suppressed"
	// StatusCanceled is a delivery canceled (DELETE /v1/notifications/{id})
	// before any worker claimed it: it is never sent.
	StatusCanceled Status = "canceled"
)

// Terminal reports whether s is final (nothing more will be sent).
func (s Status) Terminal() bool { return s != StatusQueued && s != StatusSending }

// Suppression reasons, stored in a suppressed delivery's Error.
const (
	ReasonChannelOff    = "channel_off"
	ReasonCategoryMuted = "category_muted"
	ReasonNoContact     = "no_contact"
	ReasonThrottled     = "throttled"
	ReasonNotRequested  = "not_requested"
)

// Notification is one accepted request to notify a user.
type Notification struct {
	ID          string
	RequestID   string // empty when the caller gave none
	RequestHash string // digest of the request body, to tell a retry from a clash
	UserID      string
	Type        string
	Category    Category
	Data        json.RawMessage // a JSON object
	Channels    []Channel       // the caller's narrowing; nil means every channel
	ExpiresAt   time.Time       // zero: never
	CreatedAt   time.Time
}

// Delivery is one notification on one channel.
type Delivery struct {
	NotificationID string
	Channel        Channel
	UserID         string
	Category       Category
	Provider       string
	Status         Status
	Attempts       int
	Error          string
	// NextAttemptAt is when a delayed delivery (a retry, or quiet hours)
	// is due to be queued; zero once it has been handed to the queue.
	NextAttemptAt time.Time
	ExpiresAt     time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// ProviderMessageID is the provider's id for the message sent.
	ProviderMessageID string
	// ClaimUntil is, for a delivery in status sending, when the claim of
	// the worker calling its provider lapses.
	ClaimUntil time.Time
	// Hops are the providers the last attempt tried when it did not end at
	// the first one (a backup provider, another channel).
	Hops []Hop
	// Links are the tracked short links of an SMS delivery, or the
	// tracked links of an email, with their clicks; not stored with the
	// delivery, Service.Notification fills them in when tracking is on.
	Links []Link
	// ClickedAt and OpenedAt are an email's first click and first open by
	// a person (see emailtrack.go); zero for none. Filled in as Links.
	ClickedAt, OpenedAt time.Time
}

// Key identifies the delivery.
func (d Delivery) Key() DeliveryKey { return DeliveryKey{d.NotificationID, d.Channel} }

// DeliveryKey identifies one delivery.
type DeliveryKey struct {
	NotificationID string
	Channel        Channel
}

// String is "notification_id:channel": the delivery's idempotency key,
// JetStream's Nats-Msg-Id for its first publish and the webhook-id.
func (k DeliveryKey) String() string { return k.NotificationID + ":" + string(k.Channel) }

// Record is a notification with its deliveries, in channel order.
type Record struct {
	Notification
	Deliveries []Delivery
	// Digests are the digests the notification joined, or the one it is
	// the message of, with their items; only Service.Notification fills
	// them in.
	Digests []Digest
}

// Job is the queue message for one delivery: everything a worker needs to
// send it without reading the notification back.
type Job struct {
	NotificationID string          `json:"id"`
	Channel        Channel         `json:"ch"`
	UserID         string          `json:"user"`
	Type           string          `json:"type"`
	Category       Category        `json:"cat"`
	Data           json.RawMessage `json:"data,omitempty"`
	ExpiresAt      int64           `json:"exp,omitempty"` // Unix microseconds; 0: never
	CreatedAt      int64           `json:"at"`            // Unix microseconds
	// Attempt is how many attempts were made before this publish.
	Attempt int `json:"att,omitempty"`
	// Due is the time (Unix microseconds) a delayed delivery was due when
	// the scheduler published it; 0 for a first publish or a recovery.
	Due int64 `json:"due,omitempty"`
	// Redelivered is set by the queue, not sent: the queue handed this
	// message out before (a worker failed, crashed or was too slow to
	// acknowledge), so the delivery may have changed since it was saved.
	Redelivered bool `json:"-"`
}

// Key identifies the job's delivery.
func (j Job) Key() DeliveryKey { return DeliveryKey{j.NotificationID, j.Channel} }

// MsgID is the publish's deduplication id: "notification_id:channel" for the
// first attempt, with ":<attempt>" appended for retries and replays and
// "@<due>" for delayed deliveries, so the queue drops a republished copy of
// the same attempt but not a new attempt, nor a delivery that waited in
// the queue without spending one (an open breaker).
func (j Job) MsgID() string {
	id := j.Key().String()
	if j.Attempt != 0 {
		id = fmt.Sprintf("%s:%d", id, j.Attempt)
	}
	if j.Due != 0 {
		id = fmt.Sprintf("%s@%d", id, j.Due)
	}
	return id
}

// Expired reports whether the job is past its expiry at now.
func (j Job) Expired(now time.Time) bool { return j.ExpiresAt != 0 && now.UnixMicro() >= j.ExpiresAt }

// ExpiresTime returns ExpiresAt as a time; zero when the job never expires.
func (j Job) ExpiresTime() time.Time {
	if j.ExpiresAt == 0 {
		return time.Time{}
	}
	return time.UnixMicro(j.ExpiresAt).UTC()
}

// JobFor builds the job of delivery d of notification n.
func JobFor(n Notification, d Delivery) Job {
	j := Job{
		NotificationID: n.ID, Channel: d.Channel, UserID: n.UserID, Type: n.Type,
		Category: n.Category, Data: n.Data, CreatedAt: n.CreatedAt.UnixMicro(), Attempt: d.Attempts,
	}
	if !n.ExpiresAt.IsZero() {
		j.ExpiresAt = n.ExpiresAt.UnixMicro()
	}
	return j
}

// DeadLetter is a delivery that ran out of attempts or failed permanently,
// kept for people to inspect and replay.
type DeadLetter struct {
	ID             string
	NotificationID string
	Channel        Channel
	UserID         string
	Error          string
	Attempts       int
	CreatedAt      time.Time
	ReplayedAt     time.Time // zero until replayed
}
