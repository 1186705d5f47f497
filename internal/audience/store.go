package audience

import (
	"context"
	"time"
)

// Status is where a broadcast stands.
type Status string

// The statuses of a broadcast. Scheduled and sending are live: the sender
// claims them when due; done and canceled are final.
const (
	StatusScheduled Status = "scheduled" // nothing sent yet
	StatusSending   Status = "sending"   // a group sent or sending; more to come
	StatusDone      Status = "done"      // every group sent
	StatusCanceled  Status = "canceled"  // canceled; what was unsent stays unsent
)

// Live reports whether a broadcast in status s may still send.
func (s Status) Live() bool { return s == StatusScheduled || s == StatusSending }

// To is a broadcast's audience: exactly one of its fields is set.
type To struct {
	Topic   string `json:"topic,omitempty"`
	Segment string `json:"segment,omitempty"`
}

// Local is a local-time send: Time ("09:00") on Date ("2026-12-24") in
// each member's timezone.
type Local struct {
	Time string `json:"local"`
	Date string `json:"date"`
}

// Broadcast is one send to an audience, with its progress.
type Broadcast struct {
	ID        string
	RequestID string
	// Hash digests the request so a repeated RequestID with another body
	// is told apart (409).
	Hash     string
	Type     string
	To       To
	Data     []byte // a JSON object
	Channels []string
	// SendAt is when a broadcast at a time sends; for a local-time one,
	// the earliest instant its local time can occur (in the most advanced
	// timezone), informative only.
	SendAt time.Time
	Local  Local // zero for a send at SendAt
	Status Status
	// Planned is set once the groups exist (at creation for a send at a
	// time; at the first claim for a local-time send).
	Planned bool
	// Targeted counts the members the sender reached; Accepted, those
	// notify accepted (a resent duplicate included); Skipped, those it
	// refused (e.g. a user without a contact on any channel).
	Targeted, Accepted, Skipped int64
	// DueAt is when a sender is to claim it next: the earliest unsent
	// group's due time, or the end of a node's claim; zero once final.
	DueAt time.Time
	// Seq is bumped by every write: the token of the sender's writes.
	Seq       int64
	CreatedAt time.Time
	UpdatedAt time.Time
	Groups    []Group
}

// Group is a part of a broadcast sent at one time: one per timezone for a
// local-time send, one for a send at a time.
type Group struct {
	Timezone string // "" for the one group of a send at a time
	DueAt    time.Time
	// Cursor is the last user id sent; "" before the first batch.
	Cursor string
	Done   bool
}

// Topic is a topic key and its number of subscribers.
type Topic struct {
	Key         string
	Subscribers int64
	CreatedAt   time.Time
}

// Progress is a sender's write of a claimed broadcast: it holds only while
// the stored broadcast's Seq is still Seq (the claim has not lapsed to
// another node, nor was the broadcast canceled).
type Progress struct {
	ID     string
	Seq    int64
	Status Status
	// DueAt is the broadcast's next due time (the lease's new end while
	// sending, the next group's due time when the claim is let go, zero
	// once final).
	DueAt time.Time
	// Plan, when not nil, is the groups to create (the broadcast becomes
	// Planned).
	Plan []Group
	// Group, when not nil, is the group whose cursor and done flag are
	// written (by its Timezone).
	Group *Group
	// The counts to add.
	Targeted, Accepted, Skipped int64
	Now                         time.Time
}

// Store keeps topics and broadcasts (internal/store implements it on
// SQLite and PostgreSQL; storetest pins its behaviour). Errors are
// *apperr.Error: NotFound for a missing broadcast, Conflict for a write
// whose Seq no longer holds, TooMany for a bound reached.
type Store interface {
	// Subscribe subscribes users to topic, skipping those already
	// subscribed, and returns how many it added. It refuses with TooMany
	// a new topic beyond maxTopics or subscriptions beyond maxSubs on the
	// node.
	Subscribe(ctx context.Context, topic string, users []string, now time.Time, maxTopics, maxSubs int64) (int, error)
	// Unsubscribe removes user from topic, reporting whether it was there.
	// A topic left without subscribers is removed.
	Unsubscribe(ctx context.Context, topic, user string) (bool, error)
	// Subscribers lists topic's subscribers after the user id after, in
	// user id order, at most limit.
	Subscribers(ctx context.Context, topic, after string, limit int) ([]string, error)
	// Topics lists the topics by key with their counts.
	Topics(ctx context.Context) ([]Topic, error)

	// CreateBroadcast saves b with its groups (Status, Seq and the times
	// as given) and reports true; a broadcast saved before with
	// b.RequestID is returned instead, with false. It refuses with TooMany
	// when maxLive broadcasts are already scheduled or sending.
	CreateBroadcast(ctx context.Context, b Broadcast, maxLive int) (Broadcast, bool, error)
	// Broadcast returns a broadcast with its groups, by due time.
	Broadcast(ctx context.Context, id string) (Broadcast, error)
	// Broadcasts lists broadcasts newest first, those before the id
	// before ("" for the newest), at most limit, without their groups.
	Broadcasts(ctx context.Context, before string, limit int) ([]Broadcast, error)
	// ClaimBroadcast claims one live broadcast due at now (oldest due
	// first): its DueAt moves to now+lease and its Seq is bumped, in one
	// conditional write, so concurrent claims take different ones. It
	// returns the claimed broadcast with its groups, or false for none.
	ClaimBroadcast(ctx context.Context, now time.Time, lease time.Duration) (Broadcast, bool, error)
	// SaveProgress writes p and returns the broadcast's new Seq.
	SaveProgress(ctx context.Context, p Progress) (int64, error)
	// CancelBroadcast cancels a live broadcast (its Seq bumped, so a
	// sender's next write fails) and returns it; a final one is returned
	// as it is.
	CancelBroadcast(ctx context.Context, id string, now time.Time) (Broadcast, error)
	// PurgeBroadcasts deletes at most limit final broadcasts (done or
	// canceled) last written before before, with their groups, and
	// returns how many it deleted.
	PurgeBroadcasts(ctx context.Context, before time.Time, limit int) (int, error)
}
