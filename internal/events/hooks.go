package events

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/shorten"
)

// deliveryData is the payload of delivery.* events.
type deliveryData struct {
	NotificationID string          `json:"notification_id"`
	UserID         string          `json:"user_id"`
	Type           string          `json:"type,omitempty"`
	Category       notify.Category `json:"category,omitempty"`
	Channel        notify.Channel  `json:"channel"`
	Status         notify.Status   `json:"status"`
	Attempts       int             `json:"attempts"`
	Error          string          `json:"error,omitempty"`
	Provider       string          `json:"provider,omitempty"`
	At             time.Time       `json:"at"`
}

type acceptedDelivery struct {
	Channel notify.Channel `json:"channel"`
	Status  notify.Status  `json:"status"`
	Error   string         `json:"error,omitempty"`
}

// acceptedData is the payload of notification.accepted.
type acceptedData struct {
	NotificationID string             `json:"notification_id"`
	UserID         string             `json:"user_id"`
	Type           string             `json:"type"`
	Category       notify.Category    `json:"category"`
	Deliveries     []acceptedDelivery `json:"deliveries"`
	At             time.Time          `json:"at"`
}

// OnStatus is notify.Options.OnStatus: it turns the pipeline's status
// changes into events.
func (s *Service) OnStatus(ctx context.Context, e notify.StatusEvent) {
	if !s.mayWant(e.Type) {
		return
	}
	if e.Type == notify.EventNotificationAccepted {
		ds := make([]acceptedDelivery, len(e.Deliveries))
		for i, d := range e.Deliveries {
			ds[i] = acceptedDelivery{Channel: d.Channel, Status: d.Status, Error: d.Error}
		}
		s.Emit(ctx, NotificationAccepted, acceptedData{NotificationID: e.NotificationID, UserID: e.UserID,
			Type: e.NotificationType, Category: e.Category, Deliveries: ds, At: e.At.UTC()})
		return
	}
	s.Emit(ctx, e.Type, deliveryData{NotificationID: e.NotificationID, UserID: e.UserID, Type: e.NotificationType,
		Category: e.Category, Channel: e.Channel, Status: e.Status, Attempts: e.Attempts, Error: e.Error,
		Provider: e.Provider, At: e.At.UTC()})
}

// clickData is the payload of link.clicked.
type clickData struct {
	LinkID  int64     `json:"link_id"`
	Code    string    `json:"code"`
	Domain  string    `json:"domain,omitempty"`
	Visitor string    `json:"visitor"`
	At      time.Time `json:"at"`
}

// OnClicks is shorten.Options.OnClicks: one link.clicked event per human
// click recorded (the shortener leaves bots out).
func (s *Service) OnClicks(ctx context.Context, clicks []shorten.Click) {
	if !s.mayWant(LinkClicked) {
		return
	}
	for _, c := range clicks {
		if c.Bot {
			continue
		}
		s.Emit(ctx, LinkClicked, clickData{LinkID: c.LinkID, Code: c.Code, Domain: c.Domain, Visitor: c.Visitor, At: c.At.UTC()})
	}
}
