package shorten

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Conversion is a lead or sale recorded against a click.
type Conversion struct {
	ClickID string
	Event   string
	Value   float64
	At      time.Time
	LinkID  int64
	// NotificationID is the link's notification, for links made for a
	// message: "this SMS led to N sales".
	NotificationID string
}

// ConversionTotal sums conversions.
type ConversionTotal struct {
	Count int64
	Value float64
}

// ConversionStore keeps conversions; *store.DB is one.
type ConversionStore interface {
	// RecordConversion stores c against link c.LinkID, with the link's
	// notification id, once per (click id, event): created is false, and
	// out the conversion first stored, when the pair was already recorded.
	// A link that does not exist is an apperr NotFound error; a new event
	// for a click id that has MaxClickEvents already, an apperr Conflict.
	RecordConversion(ctx context.Context, c Conversion) (out Conversion, created bool, err error)
	// LinkByID returns the link with id, or an apperr NotFound error.
	LinkByID(ctx context.Context, id int64) (Link, error)
	// NotificationConversions sums the conversions of a notification's links.
	NotificationConversions(ctx context.Context, notificationID string) (ConversionTotal, error)
}

// Bounds of a conversion: its event name's length, its value, and how
// many event names one click id may have conversions of.
const (
	maxEventLen        = 64
	MaxConversionValue = 1e12
	MaxClickEvents     = 10
)

// Convert records that the click with clickID led to event, worth value.
// The click id only names the link (it is in every redirect's Location, so
// anyone who followed the link holds one): the caller must be allowed to
// write that link, as for its other writes; a link made for a
// notification has no owner, so only an admin may. A link the caller may
// not write, or since deleted, is NotFound, as reads answer; an id this
// server did not make is an Unprocessable error naming click_id. The same
// (click id, event) again returns the first conversion with created
// false, so a retried call counts once; a click id has conversions of at
// most MaxClickEvents event names, a new one past that is a Conflict.
func (s *Service) Convert(ctx context.Context, caller Caller, clickID, event string, value float64) (Conversion, bool, error) {
	cs, ok := s.store.(ConversionStore)
	if !ok {
		return Conversion{}, false, apperr.New(apperr.Unavailable, "this store keeps no conversions")
	}
	var fields []apperr.FieldError
	linkID, err := s.verifyClickID(clickID)
	if err != nil {
		fields = append(fields, apperr.FieldError{Field: "click_id", Detail: "is not a click id this server issued"})
	}
	if !validEvent(event) {
		fields = append(fields, apperr.FieldError{Field: "event",
			Detail: fmt.Sprintf("must be 1 to %d characters of a-z, 0-9, '_', '-', '.' or ':'", maxEventLen)})
	}
	if math.IsNaN(value) || value < 0 || value > MaxConversionValue {
		fields = append(fields, apperr.FieldError{Field: "value", Detail: fmt.Sprintf("must be from 0 to %g", MaxConversionValue)})
	}
	if err := apperr.Fields(apperr.Unprocessable, "the conversion is invalid", fields); err != nil {
		return Conversion{}, false, err
	}
	errNotFound := apperr.New(apperr.NotFound, "no link of this click id found")
	l, err := cs.LinkByID(ctx, linkID)
	switch {
	case apperr.Is(err, apperr.NotFound):
		return Conversion{}, false, errNotFound
	case err != nil:
		return Conversion{}, false, fmt.Errorf("read the click's link: %w", err)
	case !caller.owns(l): // an unowned (notification) link: admins only
		return Conversion{}, false, errNotFound
	}
	c := Conversion{ClickID: clickID, Event: event, Value: value, At: s.now().UTC().Truncate(time.Microsecond), LinkID: linkID}
	out, created, err := cs.RecordConversion(ctx, c)
	if apperr.Is(err, apperr.NotFound) {
		return Conversion{}, false, errNotFound
	}
	if apperr.Is(err, apperr.Conflict) {
		return Conversion{}, false, err
	}
	if err != nil {
		return Conversion{}, false, fmt.Errorf("record conversion: %w", err)
	}
	if created {
		s.metrics.Converted()
	}
	return out, created, nil
}

// NotificationConversions sums the conversions of a notification's links.
func (s *Service) NotificationConversions(ctx context.Context, notificationID string) (ConversionTotal, error) {
	cs, ok := s.store.(ConversionStore)
	if !ok {
		return ConversionTotal{}, nil
	}
	return cs.NotificationConversions(ctx, notificationID)
}

func validEvent(e string) bool {
	if e == "" || len(e) > maxEventLen {
		return false
	}
	for _, c := range []byte(e) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}
