package events

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// Poster posts a signed Standard Webhook: webhook.Provider.Post. Its error
// is classified as a notify.Provider's (Temporary, Permanent).
type Poster interface {
	Post(ctx context.Context, url, secret, id string, body []byte) error
}

// Sender is the notify.Provider of system notifications (Options.System):
// it posts each event to its subscription, signed with the subscription's
// secret, and keeps the subscription's failure run, disabling it when the
// run is too long. Build it with NewSender; it is safe for concurrent use.
type Sender struct {
	svc    *Service
	poster Poster
}

var _ notify.Provider = (*Sender)(nil)

// NewSender returns the Sender of svc's subscriptions through p.
func NewSender(svc *Service, p Poster) *Sender { return &Sender{svc: svc, poster: p} }

// Name implements notify.Provider.
func (s *Sender) Name() string { return "events" }

// NeedsContact implements notify.Provider: the subscription is the address.
func (s *Sender) NeedsContact() bool { return false }

// SubscriptionOf returns the subscription id a system user id names.
func SubscriptionOf(user string) string { return strings.TrimPrefix(user, notify.SystemUserPrefix) }

// Send implements notify.Provider. A deleted or disabled subscription
// fails permanently (the delivery becomes a dead letter, replayable once
// the subscription is enabled again).
func (s *Sender) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	id := SubscriptionOf(m.UserID)
	sub, err := s.svc.opts.Store.EventSubscription(ctx, id)
	if apperr.Is(err, apperr.NotFound) {
		return notify.Receipt{}, notify.Permanentf("event subscription %s was deleted", id)
	}
	if err != nil {
		return notify.Receipt{}, notify.Temporary(err, 0)
	}
	if !sub.DisabledAt.IsZero() {
		return notify.Receipt{}, notify.Permanentf("event subscription %s is disabled: %s", id, sub.DisabledReason)
	}
	var head struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(m.Data, &head); err != nil || head.ID == "" {
		return notify.Receipt{}, notify.Permanentf("event message without an id")
	}
	sendErr := s.poster.Post(ctx, sub.URL, sub.Secret, head.ID, m.Data)
	s.record(context.WithoutCancel(ctx), sub, sendErr)
	return notify.Receipt{ProviderMessageID: head.ID}, sendErr
}

// record notes an attempt on sub and disables it when its failure run
// passed the subscription's limits.
func (s *Sender) record(ctx context.Context, sub Subscription, sendErr error) {
	now := s.svc.opts.Now()
	msg := ""
	if sendErr != nil {
		msg = sendErr.Error()
		if se, ok := sendErr.(*notify.SendError); ok && se.Err != nil {
			msg = se.Err.Error()
		}
		msg = msg[:min(len(msg), 500)]
	}
	got, err := s.svc.opts.Store.RecordEventAttempt(ctx, sub.ID, sendErr == nil, msg, now)
	if err != nil {
		s.svc.log.Warn("event subscription attempt not recorded", "subscription", sub.ID, "error", err)
		return
	}
	reason := ""
	switch {
	case sendErr == nil:
		return
	case got.DisableAfterFailures > 0 && got.Failures >= got.DisableAfterFailures:
		reason = fmt.Sprintf("%d consecutive failed attempts (disable_after_failures %d); last: %s", got.Failures, got.DisableAfterFailures, msg)
	case got.DisableAfter > 0 && now.Sub(got.FirstFailureAt) >= got.DisableAfter:
		reason = fmt.Sprintf("failing without a success since %s (disable_after %s); last: %s",
			got.FirstFailureAt.UTC().Format("2006-01-02T15:04:05Z07:00"), got.DisableAfter, msg)
	default:
		return
	}
	if err := s.svc.opts.Store.DisableEventSubscription(ctx, sub.ID, reason, now); err != nil {
		s.svc.log.Warn("event subscription not disabled", "subscription", sub.ID, "error", err)
		return
	}
	s.svc.invalidate()
	if s.svc.opts.Disabled != nil {
		s.svc.opts.Disabled()
	}
	s.svc.log.Warn("event subscription disabled", "subscription", sub.ID, "reason", reason)
}
