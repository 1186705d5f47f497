package httpapi

import (
	"net/http"
	"time"
)

type conversionRequest struct {
	ClickID string  `json:"click_id"`
	Event   string  `json:"event"`
	Value   float64 `json:"value"`
}

type conversionResponse struct {
	ClickID        string    `json:"click_id"`
	Event          string    `json:"event"`
	Value          float64   `json:"value"`
	At             time.Time `json:"at"`
	NotificationID string    `json:"notification_id,omitempty"`
}

// createConversion answers POST /v1/conversions: 201 for a new
// conversion, 200 with the first one for a repeat of (click_id, event),
// 404 when the click id's link is not one the caller may write, 409 for a
// new event past the click id's bound.
func (s *Server) createConversion(w http.ResponseWriter, r *http.Request) error {
	x, err := s.linkExtras()
	if err != nil {
		return err
	}
	var req conversionRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	c, created, err := x.Convert(r.Context(), linkCaller(r), req.ClickID, req.Event, req.Value)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, conversionResponse{ClickID: c.ClickID, Event: c.Event, Value: c.Value, At: c.At.UTC(),
		NotificationID: c.NotificationID})
	return nil
}
