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
// Issue 6's providers (SMTP, Twilio, FCM, APNs) implement this interface;
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
	// ProviderMessageID is the provider's id for the message, kept for
	// delivery receipts (callbacks) to find the delivery.
	ProviderMessageID string
}

// SendError is a provider's refusal, classified.
type SendError struct {
	// Permanent errors (invalid address, unregistered token, 4xx) are not
	// retried.
	Permanent bool
	// RetryAfter is the provider's own wait (Retry-After), or zero.
	RetryAfter time.Duration
	Err        error
}

func (e *SendError) Error() string {
	kind := "temporary"
	if e.Permanent {
		kind = "permanent"
	}
	return kind + ": " + e.Err.Error()
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

// classify returns whether err is permanent and the provider's wait.
func classify(err error) (permanent bool, retryAfter time.Duration) {
	if se, ok := errors.AsType[*SendError](err); ok {
		return se.Permanent, se.RetryAfter
	}
	return false, 0
}

// Rewriter is a step between rendering and sending: it may change the
// message (issue 6's link rewriter replaces links in SMS bodies by tracked
// short links). A Rewriter must not fail the delivery for its own
// problems: it returns m unchanged instead, and an error only to log.
type Rewriter interface {
	Rewrite(ctx context.Context, m Message) (Message, error)
}

// RewriterFunc adapts a function to Rewriter.
type RewriterFunc func(ctx context.Context, m Message) (Message, error)

// Rewrite calls f.
func (f RewriterFunc) Rewrite(ctx context.Context, m Message) (Message, error) { return f(ctx, m) }
