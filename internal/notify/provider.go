package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Message is one rendered delivery, as a provider receives it.
type Message struct {
	NotificationID string
	Channel        Channel
	UserID         string
	Type           string
	Category       Category
	// To is the user's address on the channel (email address, phone
	// number, push token, webhook URL); empty when the user has none, which
	// only providers that need no address (the outbox) accept.
	To      string
	Subject string
	Body    string
	// HTML is an email's HTML part, sent beside Body; empty for none and
	// on other channels.
	HTML string
	// TrackLinks is the type's own ask for tracked email links
	// (Template.TrackLinks), and NoTrack the links its template marks
	// {no_track ...}: both read by the email tracking rewriter.
	TrackLinks bool
	NoTrack    []string
	// Data is the notification's data object, for providers that pass it
	// on (webhooks, push payloads).
	Data json.RawMessage
	// IdempotencyKey is "notification_id:channel", the same on every
	// attempt: providers that support idempotency keys pass it on.
	IdempotencyKey string
	Attempt        int // 1 for the first attempt
	CreatedAt      time.Time
	ExpiresAt      time.Time // zero: never
}

// Provider sends messages on one channel. Implementations are safe for
// concurrent use. Send returns nil when the provider accepted the message,
// a *SendError built with [Permanent] or [Temporary] when it refused it,
// and any other error is treated as temporary. Send must honour ctx's
// deadline.
//
// The real providers (SMTP, Twilio, FCM, APNs) implement this interface;
// pacing, circuit breaking and failover wrap a Provider in another
// Provider, so the worker does not change.
type Provider interface {
	// Name identifies the provider in deliveries ("outbox", "webhook").
	Name() string
	// NeedsContact reports whether the provider needs Message.To; a
	// delivery to a user without an address on the channel is then
	// suppressed with reason no_contact.
	NeedsContact() bool
	Send(ctx context.Context, m Message) (Receipt, error)
}

// Receipt is what a provider says about an accepted message.
type Receipt struct {
	// ProviderMessageID is the provider's id for the message (Twilio's
	// message SID, FCM's message name, APNs' apns-id), shown on the
	// delivery.
	ProviderMessageID string
	// Provider names the provider that accepted the message when it is not
	// the one the worker called (a [Route] that fell back to its backup).
	Provider string
	// Hops are the providers tried before this one in the same attempt.
	Hops []Hop
	// Outbox is set by a provider whose sending is a row in the record
	// store (the built-in outbox): instead of writing it alone, it hands
	// the row to the worker, which stores it in the same transaction as
	// the attempt's outcome. The row and the sent status are then saved
	// together or not at all, and a delivery costs one write, not two.
	Outbox *OutboxEntry
	// Inbox is the inapp provider's message for the user's inbox, stored
	// as Outbox is; the store sets its Seq.
	Inbox *InboxEntry
	// Committed, when not nil, is called once the sent outcome (with
	// Outbox or Inbox) is stored, and not when the store refused it as a
	// stale copy's: the inapp provider publishes the inbox event then, so
	// a stream never hears of a message the store does not hold.
	Committed func(ctx context.Context)
}

// SendError is a provider's refusal, classified.
type SendError struct {
	// Permanent errors (invalid address, unregistered token, 4xx) are not
	// retried.
	Permanent bool
	// Unavailable means the provider was not called at all (its circuit
	// breaker is open, or pacing would have waited too long): the delivery
	// waits RetryAfter in the queue without spending an attempt, so a
	// marketing message with one retry left is not dropped by an outage.
	Unavailable bool
	// Provider marks a temporary error caused by the provider or our
	// account with it (credentials refused, account suspended), not by the
	// message or its address: for failover categories the next provider of
	// the chain is tried at once; others retry it as temporary, and it
	// counts against the provider's breaker.
	Provider bool
	// RetryAfter is the provider's own wait (Retry-After), or zero.
	RetryAfter time.Duration
	Err        error
}

// Class names the kind of error: "permanent", "temporary" or
// "unavailable"; the label of the provider error metrics.
func (e *SendError) Class() string {
	switch {
	case e.Permanent:
		return ClassPermanent
	case e.Unavailable:
		return ClassUnavailable
	}
	return ClassTemporary
}

// Error classes, as [SendError.Class] and [ErrorClass] name them.
const (
	ClassOK          = "ok"
	ClassPermanent   = "permanent"
	ClassTemporary   = "temporary"
	ClassUnavailable = "unavailable"
)

// ErrorClass returns the class of a Send error: "ok" for nil, the
// SendError's class, and "temporary" for anything else.
func ErrorClass(err error) string {
	if err == nil {
		return ClassOK
	}
	if se, ok := errors.AsType[*SendError](err); ok {
		return se.Class()
	}
	return ClassTemporary
}

// ErrUnregistered marks a permanent error meaning the address is gone for
// good (FCM UNREGISTERED, APNs 410): the worker removes it from the user's
// contacts, so later messages do not try it again.
var ErrUnregistered = errors.New("address unregistered")

func (e *SendError) Error() string {
	return e.Class() + ": " + e.Err.Error()
}

func (e *SendError) Unwrap() error { return e.Err }

// Permanent wraps err as a failure that retrying cannot fix.
func Permanent(err error) error { return &SendError{Permanent: true, Err: err} }

// Permanentf is Permanent(fmt.Errorf(format, args...)).
func Permanentf(format string, args ...any) error { return Permanent(fmt.Errorf(format, args...)) }

// Temporary wraps err as a failure worth retrying, after at least
// retryAfter when that is positive.
func Temporary(err error, retryAfter time.Duration) error {
	return &SendError{Err: err, RetryAfter: retryAfter}
}

// ProviderFault wraps err as a temporary failure of the provider itself,
// not of the message (see SendError.Provider).
func ProviderFault(err error, retryAfter time.Duration) error {
	return &SendError{Err: err, Provider: true, RetryAfter: retryAfter}
}

// IsProviderFault reports whether err is a ProviderFault.
func IsProviderFault(err error) bool {
	se, ok := errors.AsType[*SendError](err)
	return ok && se.Provider && !se.Permanent && !se.Unavailable
}

// Unavailable wraps err as a call that was not made: the delivery waits at
// least retryAfter without spending an attempt.
func Unavailable(err error, retryAfter time.Duration) error {
	return &SendError{Unavailable: true, Err: err, RetryAfter: retryAfter}
}

// classify returns whether err is permanent and the provider's wait.
func classify(err error) (permanent bool, retryAfter time.Duration) {
	if se, ok := errors.AsType[*SendError](err); ok {
		return se.Permanent, se.RetryAfter
	}
	return false, 0
}

// Rewriter is a step between rendering and sending: it may change the
// message (ShortenSMSLinks replaces links in SMS bodies by tracked short
// links). A Rewriter must not fail the delivery for its own
// problems: it returns m unchanged instead, and an error only to log.
type Rewriter interface {
	Rewrite(ctx context.Context, m Message) (Message, error)
}

// RewriterFunc adapts a function to Rewriter.
type RewriterFunc func(ctx context.Context, m Message) (Message, error)

// Rewrite calls f.
func (f RewriterFunc) Rewrite(ctx context.Context, m Message) (Message, error) { return f(ctx, m) }
