// Package events sends status events out: subscriptions (a URL and the
// event types it wants) receive Standard Webhooks when a notification is
// accepted, a delivery reaches sent, delivered, failed or dead, or a
// person clicks a tracked link.
//
// Events ride the notification pipeline rather than a second one: every
// event generated is written to an event log (kept Options.Retention, for
// recover), and each subscription that wants it gets a system notification
// (notify.SendSystem) whose one webhook delivery is the event. That
// delivery is saved, queued, claimed, retried with backoff, dead-lettered
// and replayable like any other; [Sender] posts it, signed with the
// subscription's own secret and with the event's id as webhook-id (the
// same on every retry, replay and recover, so receivers drop repeats).
// System deliveries report no status events themselves, so a failing
// subscription cannot feed itself.
//
// A subscription counts its consecutive failed attempts and when the run
// began; it is disabled (and its pending events dead-lettered) once the
// run has lasted DisableAfter or reached DisableAfterFailures, like Svix's
// five days. Recover enables it again and queues the retained events it
// wants since a time that it did not receive (every one with all).
//
// This is a domain package: storage is behind [Store] (internal/store),
// the HTTP posting behind [Poster] (internal/notify/webhook).
package events

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// Event types a subscription may ask for.
const (
	NotificationAccepted = "notification.accepted"
	DeliverySent         = "delivery.sent"
	DeliveryDelivered    = "delivery.delivered"
	DeliveryFailed       = "delivery.failed"
	DeliveryDead         = "delivery.dead"
	DeliveryClicked      = "delivery.clicked"
	DeliveryOpened       = "delivery.opened"
	LinkClicked          = "link.clicked"
)

// Types lists every event type, in the order documentation shows them.
var Types = []string{NotificationAccepted, DeliverySent, DeliveryDelivered, DeliveryFailed, DeliveryDead,
	DeliveryClicked, DeliveryOpened, LinkClicked}

// ValidType reports whether t is a known event type.
func ValidType(t string) bool { return slices.Contains(Types, t) }

// Subscription is an endpoint that receives events.
type Subscription struct {
	ID     string // "evs_..."
	URL    string
	Events []string
	// Secret is the Standard Webhooks signing secret ("whsec_...").
	Secret string
	// DisableAfter disables the subscription once its attempts have
	// failed without a success for this long; zero: never by time.
	DisableAfter time.Duration
	// DisableAfterFailures disables it after this many consecutive failed
	// attempts; zero: never by count.
	DisableAfterFailures int
	CreatedAt            time.Time

	// Failures counts consecutive failed attempts (zero after a success);
	// FirstFailureAt is the first of them.
	Failures       int
	FirstFailureAt time.Time
	LastFailureAt  time.Time
	LastError      string
	LastSuccessAt  time.Time
	// DisabledAt is when it was disabled (zero: enabled), for
	// DisabledReason.
	DisabledAt     time.Time
	DisabledReason string
}

// Wants reports whether s is enabled and subscribed to event type t.
func (s Subscription) Wants(t string) bool {
	return s.DisabledAt.IsZero() && slices.Contains(s.Events, t)
}

// Event is one entry of the event log.
type Event struct {
	ID   string // "evt_...": the webhook-id of every delivery of it
	Type string
	// Data is the event's payload, a JSON object.
	Data json.RawMessage
	At   time.Time
}

// Store keeps subscriptions and the event log. internal/store implements
// it on SQLite and PostgreSQL (conformance suite: storetest). Errors carry
// apperr codes.
type Store interface {
	// CreateEventSubscription stores s (Conflict for an existing id).
	CreateEventSubscription(ctx context.Context, s Subscription) error
	// EventSubscription returns one subscription, or NotFound.
	EventSubscription(ctx context.Context, id string) (Subscription, error)
	// EventSubscriptions returns every subscription, oldest first.
	EventSubscriptions(ctx context.Context) ([]Subscription, error)
	// DeleteEventSubscription deletes one, or fails with NotFound.
	DeleteEventSubscription(ctx context.Context, id string) error
	// RecordEventAttempt notes an attempt's outcome on subscription id: a
	// success clears the failure run and sets LastSuccessAt; a failure
	// counts one more, keeping FirstFailureAt of the run (set at at when
	// the run starts), with LastError and LastFailureAt. It returns the
	// subscription as updated, or NotFound.
	RecordEventAttempt(ctx context.Context, id string, ok bool, errMsg string, at time.Time) (Subscription, error)
	// DisableEventSubscription disables id at at with reason, unless it is
	// disabled already (which keeps the first time and reason).
	DisableEventSubscription(ctx context.Context, id, reason string, at time.Time) error
	// EnableEventSubscription enables id and clears its failure run,
	// returning it, or NotFound.
	EnableEventSubscription(ctx context.Context, id string) (Subscription, error)
	// AppendEvent adds e to the event log (Conflict for an existing id).
	AppendEvent(ctx context.Context, e Event) error
	// EventsSince returns up to limit logged events at or after since,
	// oldest first (at, then id), strictly after the event afterID at
	// since when afterID is not empty.
	EventsSince(ctx context.Context, since time.Time, afterID string, limit int) ([]Event, error)
	// UndeliveredEvents returns up to limit logged events of the given
	// types, paged as EventsSince, that subscription subID has not
	// received: none of the system notifications carrying the event to it
	// (request id evt:<event>:<subID>, or evt:<event>:<subID>:<run> when a
	// recover queued it) has a delivery sent or delivered, or queued or
	// sending without a failed attempt yet. Events whose deliveries
	// failed, went dead, were canceled or expired, or are retrying after
	// a failure, and events never queued to it (or whose notification the
	// history purge deleted) are returned.
	UndeliveredEvents(ctx context.Context, subID string, types []string, since time.Time, afterID string, limit int) ([]Event, error)
	// DeleteEventsBefore deletes up to limit events logged before t and
	// returns how many.
	DeleteEventsBefore(ctx context.Context, t time.Time, limit int) (int, error)
}
