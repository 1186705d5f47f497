package notify

import (
	"context"
	"time"
)

// Store keeps notifications and everything around them. internal/store
// implements it on SQLite and PostgreSQL; its conformance suite pins the
// behaviour described here. Errors carry apperr codes (NotFound, Conflict,
// Unavailable).
type Store interface {
	// CreateNotification saves n and its deliveries in one transaction,
	// which may be shared with other callers' writes (group commit); it
	// returns once that transaction is durable. When a notification with
	// n.RequestID already exists it saves nothing and returns that one's
	// ID and RequestHash with created false. When n.ID itself is already
	// stored (a call again after one that failed while its transaction
	// committed: the connection dropped before COMMIT's answer) it saves
	// nothing and reports created true, so a caller may repeat a failed
	// create of the same n (same ID) without making two. A store that
	// queues writes serves those of a notification whose n.Category is
	// Urgent first.
	CreateNotification(ctx context.Context, n Notification, ds []Delivery) (existing Notification, created bool, err error)
	// NotificationByRequestID returns the notification saved with
	// requestID, or NotFound.
	NotificationByRequestID(ctx context.Context, requestID string) (Notification, error)
	// Notification returns a notification and its deliveries, or NotFound.
	Notification(ctx context.Context, id string) (Record, error)
	// UserNotifications returns up to limit of user's notifications created
	// at or after since, newest first (created_at, then id, descending),
	// strictly after the cursor position when after is not zero.
	UserNotifications(ctx context.Context, user string, since time.Time, after Cursor, limit int) ([]Record, error)
	// Delivery returns one delivery, or NotFound.
	Delivery(ctx context.Context, key DeliveryKey) (Delivery, error)
	// ClaimDelivery marks a delivery sending under c.Owner until c.Until,
	// before its provider is called. It applies only while the delivery
	// has c.Prev attempts and is either queued and due at c.At
	// (NextAttemptAt unset or not after c.At) or sending under a claim
	// that lapsed at or before c.At, and reports whether it applied: of
	// concurrent claims of one delivery, on any number of nodes, exactly
	// one wins. A store that queues writes serves c.Urgent ones first.
	ClaimDelivery(ctx context.Context, c Claim) (bool, error)
	// ExtendClaim moves the lapse of a delivery's claim to c.Until, while the delivery is still sending under c.Owner's claim,
	// and reports whether it did: false when another worker took the
	// lapsed claim over, or the outcome is stored. A worker renews its
	// claim this way while its provider call runs, so a claim lasts a
	// short lease past its worker's last renewal. A store that queues
	// writes serves c.Urgent ones first.
	ExtendClaim(ctx context.Context, c Claim) (bool, error)
	// FinishAttempt records an attempt's outcome on a delivery that still
	// has a.Prev attempts and is queued, or sending under the claim
	// a.Claim: status, attempts, error, the next attempt's time, a.Outbox,
	// a.Inbox, and a dead letter when dl is not nil, in one transaction (group
	// committed); the claim is cleared. It reports false, changing
	// nothing, otherwise (another copy of the job got there first, or took
	// over a lapsed claim). A store that queues writes serves a.Urgent
	// ones first.
	FinishAttempt(ctx context.Context, a Attempt, dl *DeadLetter) (bool, error)
	// CancelDeliveries moves every delivery of notification id that is
	// queued (due, or waiting for a retry or the end of quiet hours) to
	// canceled at at, in one transaction, and returns the channels it
	// canceled; NotFound when there is no such notification. A delivery
	// claimed for sending, or final, is left as it is. Claims and outcomes
	// are conditional on queued (see ClaimDelivery, FinishAttempt), so of a
	// cancel and a claim of one delivery exactly one applies.
	CancelDeliveries(ctx context.Context, id string, at time.Time) ([]Channel, error)
	// DueDeliveries returns up to limit queued deliveries whose
	// NextAttemptAt is set and at or before now, as jobs, oldest due first.
	DueDeliveries(ctx context.Context, now time.Time, limit int) ([]Job, error)
	// StaleDeliveries returns up to limit deliveries on ch of category c,
	// as jobs, that the recovery sweep should republish: queued ones, not
	// delayed, last updated before before, oldest first, then sending ones
	// whose claim lapsed before before (their worker is gone).
	StaleDeliveries(ctx context.Context, ch Channel, c Category, before time.Time, limit int) ([]Job, error)
	// MarkQueued clears NextAttemptAt and sets UpdatedAt to at on the
	// given deliveries that are queued and due at at (a delivery a worker
	// rescheduled since its publish keeps its new time), or sending under
	// a claim that lapsed before at (those are queued again, their claim
	// cleared): they have been (re)published.
	MarkQueued(ctx context.Context, keys []DeliveryKey, at time.Time) error
	// RecordReceipt moves a sent delivery to status (delivered or failed)
	// with errMsg, from a provider's callback. It reports false, changing
	// nothing, when the delivery is not sent (still queued, or final
	// already), and NotFound when there is no such delivery.
	RecordReceipt(ctx context.Context, key DeliveryKey, status Status, errMsg string, at time.Time) (bool, error)

	// Settings returns user's stored settings; found is false (and the
	// error nil) when there are none.
	Settings(ctx context.Context, user string) (s Settings, found bool, err error)
	// SettingsOf returns the stored settings of those of users who have
	// some, by user.
	SettingsOf(ctx context.Context, users []string) (map[string]Settings, error)
	// PutSettings stores user's settings, replacing any.
	PutSettings(ctx context.Context, user string, s Settings) error
	// Template returns a stored template; found is false when none.
	Template(ctx context.Context, typ string) (t Template, found bool, err error)
	// PutTemplate stores t, replacing any template of its type.
	PutTemplate(ctx context.Context, t Template) error
	// TemplateCategories returns the category of every stored template.
	TemplateCategories(ctx context.Context) (map[string]Category, error)
	// Templates returns every stored template, sorted by type.
	Templates(ctx context.Context) ([]Template, error)
	// DeleteTemplate removes the stored template of typ; found is false
	// (and the error nil) when none was stored.
	DeleteTemplate(ctx context.Context, typ string) (found bool, err error)

	// DeadLetters returns up to limit dead letters, newest first, strictly
	// after the cursor position when after is not zero.
	DeadLetters(ctx context.Context, after Cursor, limit int) ([]DeadLetter, error)
	// ReplayDeadLetter marks dead letter id replayed at now and puts its
	// delivery back to queued, due at now, keeping its attempt count. It
	// fails with NotFound for an unknown id and Conflict for a dead letter
	// already replayed.
	ReplayDeadLetter(ctx context.Context, id string, now time.Time) (Delivery, error)

	// OutboxEntries returns up to limit entries of the built-in outbox
	// matching f, newest first (created_at, then the entry's cursor id
	// "notification_id:channel:attempt", descending), strictly after the
	// cursor position when after is not zero.
	OutboxEntries(ctx context.Context, f OutboxFilter, after Cursor, limit int) ([]OutboxEntry, error)

	// DeleteNotificationsBefore deletes up to limit notifications created
	// before t, with their deliveries, outbox entries and dead letters,
	// and returns how many it deleted.
	DeleteNotificationsBefore(ctx context.Context, t time.Time, limit int) (int, error)

	DigestStore
}

// Claim is a worker's hold on a delivery while it calls the provider:
// the delivery shows status sending, and other copies of its job wait.
type Claim struct {
	Key DeliveryKey
	// Prev is the attempt count the worker read.
	Prev int
	// Owner names the attempt (unique per attempt, on every node).
	Owner string
	// At is the claim's time; Until is when it lapses, after which another
	// worker may take the delivery over.
	At, Until time.Time
	// Urgent is not stored (see Attempt.Urgent).
	Urgent bool
}

// Attempt is the outcome of one attempt at a delivery, as stored.
type Attempt struct {
	Key    DeliveryKey
	Status Status
	// Prev is the attempt count the worker read; the write applies only
	// while the delivery still has it (and is queued, or sending under
	// Claim).
	Prev int
	// Claim is the owner of the attempt's claim; empty when the attempt
	// made none (it ended before any provider call).
	Claim         string
	Attempts      int
	Error         string
	NextAttemptAt time.Time
	At            time.Time
	// Provider names the provider that made the attempt when it is not the
	// delivery's (a backup); empty leaves it.
	Provider          string
	ProviderMessageID string
	Hops              []Hop
	// Outbox, when not nil, is stored with a sent outcome (Receipt.Outbox)
	// as the delivery's outbox entry: a delivery holds at most one.
	Outbox *OutboxEntry
	// Inbox, when not nil, is stored with a sent outcome (Receipt.Inbox)
	// under the user's next inbox Seq, which FinishAttempt sets in it,
	// unless the user's inbox holds the message already (then Seq is the
	// stored one's). The delivery's ProviderMessageID becomes
	// "user_id:seq".
	Inbox *InboxEntry
	// Urgent is not stored: it asks a store that queues writes to serve
	// this one first (set for a critical notification's attempts; see
	// Category.Urgent).
	Urgent bool
}

// Cursor is a position in a newest-first list: the last item's time and id.
type Cursor struct {
	At time.Time
	ID string
}

// IsZero reports the start of a list.
func (c Cursor) IsZero() bool { return c.ID == "" }

// Queue carries jobs to workers: one queue per channel x category, so a
// marketing flood never delays a critical message. Publish may return
// before the queue has stored the job; a job the queue then loses is
// found by the recovery sweep. Publishing the same Job.MsgID twice within
// the queue's deduplication window stores it once.
type Queue interface {
	Publish(ctx context.Context, j Job) error
}

// QueueConfirmer is optional for a Queue: PublishConfirmed publishes jobs
// and returns once the queue holds every one (retrying for a while), or
// the error of one it could not place. Send uses it, so that a
// notification's jobs are queued before it is answered: a request sent
// after that answer is queued after them, whatever fails meanwhile.
type QueueConfirmer interface {
	PublishConfirmed(ctx context.Context, jobs []Job) error
}

// QueueHorizon is optional for a Queue: it returns, for one channel x
// category queue, the time before which every job published has been
// handled (acknowledged); now when nothing is pending. The recovery sweep
// republishes only queued deliveries older than it, so a long backlog is
// not republished while it drains.
type QueueHorizon interface {
	Horizon(ctx context.Context, ch Channel, c Category) (time.Time, error)
}

// Dedupe is the fast path of request_id deduplication (Redis SET NX EX, or
// memory). Claim records value under key unless the key exists, and
// returns the value already there when it does. It may forget keys (an
// expiry, a restart): the store's unique request_id is the safety net.
type Dedupe interface {
	Claim(ctx context.Context, key, value string) (existing string, claimed bool, err error)
	Release(ctx context.Context, key string) error
}
