package notify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// SystemUserPrefix starts the user id of a system notification: one that
// Sluice sends to an endpoint of its own (a status event to an event
// subscription) rather than to a person. Requests may not use such user
// ids (Request.Validate refuses them), so nobody can make Sluice sign a
// message of their own with a subscription's secret.
//
// A system notification goes through the pipeline like any other (saved,
// queued, claimed, retried with backoff, dead-lettered, replayable) on the
// webhook channel, but it has no settings, template or rewriting: its
// message is its data, handed as it is to Options.System, and its
// deliveries report no status changes (OnStatus), so status events about
// status events cannot loop.
const SystemUserPrefix = "sluice:"

// IsSystemUser reports whether user is a system recipient.
func IsSystemUser(user string) bool { return strings.HasPrefix(user, SystemUserPrefix) }

// SystemRequest asks for one system notification.
type SystemRequest struct {
	// RequestID makes the request idempotent, as Request.RequestID.
	RequestID string
	// Recipient names the system endpoint; the notification's user id is
	// SystemUserPrefix + Recipient.
	Recipient string
	// Type is shown as the notification's type.
	Type string
	// Data is the message, a JSON object of at most MaxDataBytes.
	Data json.RawMessage
}

// SendSystem saves and queues a system notification with one delivery on
// the webhook channel, sent by Options.System (see SystemUserPrefix). Its
// retry rule is the orders category's: backoff, then a dead letter.
func (s *Service) SendSystem(ctx context.Context, r SystemRequest) (Accepted, error) {
	if s.opts.System == nil {
		return Accepted{}, apperr.New(apperr.Unavailable, "system notifications are not configured")
	}
	if r.Recipient == "" || len(r.Data) > MaxDataBytes || len(r.Data) == 0 || r.Data[0] != '{' {
		return Accepted{}, apperr.New(apperr.Invalid, "a system notification needs a recipient and a JSON object of at most %d bytes", MaxDataBytes)
	}
	now := s.now()
	sum := sha256.Sum256(append([]byte(r.Recipient+"\x00"+r.Type+"\x00"), r.Data...))
	n := Notification{
		ID: NewID("ntf_", now), RequestID: r.RequestID, RequestHash: hex.EncodeToString(sum[:16]),
		UserID: SystemUserPrefix + r.Recipient, Type: r.Type, Category: Orders, Data: r.Data,
		Channels: []Channel{Webhook}, CreatedAt: now,
	}
	d := s.newDelivery(n, Webhook, now)
	d.Provider = s.opts.System.Name()
	ds := []Delivery{d}
	existing, created, err := s.opts.Store.CreateNotification(ctx, n, ds)
	if err != nil {
		return Accepted{}, err
	}
	if !created {
		s.requeue(ctx, existing.ID)
		return Accepted{NotificationID: existing.ID, Duplicate: true}, nil
	}
	s.publish(ctx, n, ds)
	return Accepted{NotificationID: n.ID}, nil
}

// systemMessage is the message of a system notification's job: its data,
// unrendered.
func systemMessage(j Job) Message {
	return Message{
		NotificationID: j.NotificationID, Channel: j.Channel, UserID: j.UserID, Type: j.Type,
		Category: j.Category, Body: string(j.Data), Data: j.Data, IdempotencyKey: j.Key().String(),
		Attempt: j.Attempt + 1, CreatedAt: time.UnixMicro(j.CreatedAt).UTC(),
	}
}

// StatusEvent is a stored change that status events report: a
// notification accepted, or a delivery that reached sent, delivered,
// failed or dead (EventDelivery* and EventNotificationAccepted name
// them).
type StatusEvent struct {
	Type           string
	NotificationID string
	UserID         string
	// NotificationType and Category are the notification's.
	NotificationType string
	Category         Category
	// Channel, Status, Attempts, Error and Provider describe the delivery
	// (for a delivery event).
	Channel  Channel
	Status   Status
	Attempts int
	Error    string
	Provider string
	// Deliveries are the planned deliveries, for notification.accepted.
	Deliveries []Delivery
	At         time.Time
}

// Status event types.
const (
	EventNotificationAccepted = "notification.accepted"
	EventDeliverySent         = "delivery.sent"
	EventDeliveryDelivered    = "delivery.delivered"
	EventDeliveryFailed       = "delivery.failed"
	EventDeliveryDead         = "delivery.dead"
)

// deliveryEvents maps the statuses that status events report to their
// event type.
var deliveryEvents = map[Status]string{
	StatusSent: EventDeliverySent, StatusDelivered: EventDeliveryDelivered,
	StatusFailed: EventDeliveryFailed, StatusDead: EventDeliveryDead,
}

// emitDelivery reports a stored delivery status to Options.OnStatus, when
// it is one status events report and the delivery is not a system one.
func (s *Service) emitDelivery(ctx context.Context, e StatusEvent) {
	typ, ok := deliveryEvents[e.Status]
	if !ok || s.opts.OnStatus == nil || IsSystemUser(e.UserID) {
		return
	}
	e.Type = typ
	s.opts.OnStatus(context.WithoutCancel(ctx), e)
}

// emitAccepted reports an accepted notification to Options.OnStatus.
func (s *Service) emitAccepted(ctx context.Context, n Notification, ds []Delivery) {
	if s.opts.OnStatus == nil || IsSystemUser(n.UserID) {
		return
	}
	s.opts.OnStatus(context.WithoutCancel(ctx), StatusEvent{Type: EventNotificationAccepted, NotificationID: n.ID,
		UserID: n.UserID, NotificationType: n.Type, Category: n.Category, Deliveries: ds, At: n.CreatedAt})
}
