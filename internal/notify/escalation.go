package notify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ReasonEngaged starts the suppression reason of an escalation the user
// made unnecessary: "engaged: clicked".
const ReasonEngaged = "engaged"

// escalationMarker starts the Error of a delivery waiting for its
// escalation, followed by the conditions that cancel it.
const escalationMarker = "escalation: unless "

// InboxReads reports whether a user read a notification in the in-app
// inbox; the escalation condition "read" asks it. The inbox implements it.
type InboxReads interface {
	NotificationRead(ctx context.Context, userID, notificationID string) (bool, error)
}

// escalate holds back the channels of t's escalation rule in ds, the
// deliveries planned for n: a live one is delayed by the rule's After and
// marked; a channel not planned (outside the request's channels) is added,
// delayed or suppressed as the user's settings say. When no other channel
// is live there is nothing to wait for, and the held-back channels go at
// once.
func (s *Service) escalate(n Notification, t Template, st Settings, ds []Delivery, now time.Time) []Delivery {
	r := t.Escalation
	if r == nil {
		return ds
	}
	first := slices.ContainsFunc(ds, func(d Delivery) bool {
		return d.Status == StatusQueued && !slices.Contains(r.To, d.Channel)
	})
	for _, ch := range r.To {
		i := slices.IndexFunc(ds, func(d Delivery) bool { return d.Channel == ch })
		if i < 0 {
			d := s.newDelivery(n, ch, now)
			if reason := s.suppressed(n, st, ch); reason != "" {
				d.Status, d.Error = StatusSuppressed, reason
			}
			ds = append(ds, d)
			i = len(ds) - 1
		}
		if ds[i].Status != StatusQueued || !first {
			continue
		}
		due := now.Add(r.AfterDuration())
		if ds[i].NextAttemptAt.After(due) {
			due = ds[i].NextAttemptAt // quiet hours last longer
		}
		ds[i].NextAttemptAt, ds[i].Error = due, escalationMarker+strings.Join(r.Conditions(), ",")
	}
	// Deliveries are stored and shown in channel order.
	slices.SortStableFunc(ds, func(a, b Delivery) int {
		return slices.Index(Channels, a.Channel) - slices.Index(Channels, b.Channel)
	})
	return ds
}

// pendingEscalation returns the conditions a delivery waits on before its
// first attempt, or ok false when it is no escalation.
func pendingEscalation(d Delivery) (conditions []string, ok bool) {
	rest, ok := strings.CutPrefix(d.Error, escalationMarker)
	if !ok || d.Attempts != 0 {
		return nil, false
	}
	return strings.Split(rest, ","), true
}

// engaged reports the first of conditions that holds for the notification
// of delivery key (empty when none does), read from the store.
func (s *Service) engaged(ctx context.Context, key DeliveryKey, conditions []string) (string, error) {
	for _, c := range conditions {
		switch c {
		case EngagedDelivered:
			rec, err := s.opts.Store.Notification(ctx, key.NotificationID)
			if err != nil {
				return "", fmt.Errorf("read notification %s: %w", key.NotificationID, err)
			}
			if slices.ContainsFunc(rec.Deliveries, func(d Delivery) bool {
				return d.Channel != key.Channel && d.Status == StatusDelivered
			}) {
				return c, nil
			}
		case EngagedClicked:
			if s.opts.Links != nil {
				links, err := s.opts.Links.Links(ctx, key.NotificationID)
				if err != nil {
					return "", fmt.Errorf("read link clicks of %s: %w", key.NotificationID, err)
				}
				if slices.ContainsFunc(links, func(l Link) bool { return l.Clicks > 0 }) {
					return c, nil
				}
			}
			clicked, _, err := s.emailEngaged(ctx, key)
			if err != nil {
				return "", err
			}
			if !clicked.IsZero() {
				return c, nil
			}
		case EngagedOpened:
			_, opened, err := s.emailEngaged(ctx, key)
			if err != nil {
				return "", err
			}
			if !opened.IsZero() {
				return c, nil
			}
		case EngagedRead:
			if s.opts.Reads == nil {
				continue
			}
			rec, err := s.opts.Store.Notification(ctx, key.NotificationID)
			if err != nil {
				return "", fmt.Errorf("read notification %s: %w", key.NotificationID, err)
			}
			read, err := s.opts.Reads.NotificationRead(ctx, rec.UserID, key.NotificationID)
			if err != nil {
				return "", fmt.Errorf("read inbox state of %s: %w", key.NotificationID, err)
			}
			if read {
				return c, nil
			}
		}
	}
	return "", nil
}

// emailEngaged returns the first click and open of the notification's
// email, zero without email tracking or without a person's hit.
func (s *Service) emailEngaged(ctx context.Context, key DeliveryKey) (clicked, opened time.Time, err error) {
	if s.opts.Email.Store == nil || key.Channel == Email {
		return time.Time{}, time.Time{}, nil
	}
	links, err := s.opts.Email.Store.EmailLinks(ctx, key.NotificationID)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("read email clicks of %s: %w", key.NotificationID, err)
	}
	clicked, opened = engagementTimes(links)
	return clicked, opened, nil
}
