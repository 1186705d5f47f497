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
	// A link that does not exist is an apperr NotFound error.
	RecordConversion(ctx context.Context, c Conversion) (out Conversion, created bool, err error)
	// NotificationConversions sums the conversions of a notification's links.
	NotificationConversions(ctx context.Context, notificationID string) (ConversionTotal, error)
}

// Bounds of a conversion.
const (
	maxEventLen        = 64
	MaxConversionValue = 1e12
)

// Convert records that the click with clickID led to event, worth value.
// Holding the click id is the authority: it is unguessable and signed, and
// a link made for a notification has no owner to check. An id this server
// did not make, or of a link since deleted, is an Unprocessable error
// naming click_id; the same (click id, event) again returns the first
// conversion with created false, so a retried call counts once.
func (s *Service) Convert(ctx context.Context, clickID, event string, value float64) (Conversion, bool, error) {
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
	c := Conversion{ClickID: clickID, Event: event, Value: value, At: s.now().UTC().Truncate(time.Microsecond), LinkID: linkID}
	out, created, err := cs.RecordConversion(ctx, c)
	if apperr.Is(err, apperr.NotFound) {
		return Conversion{}, false, &apperr.Error{Code: apperr.Unprocessable, Message: "the conversion is invalid",
			Fields: []apperr.FieldError{{Field: "click_id", Detail: "its link no longer exists"}}}
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
