package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/events"
)

// EventSubscriptions is what the event subscription routes need of the
// status events service (events.Service).
type EventSubscriptions interface {
	Create(ctx context.Context, n events.NewSubscription) (events.Subscription, error)
	Subscriptions(ctx context.Context) ([]events.Subscription, error)
	Subscription(ctx context.Context, id string) (events.Subscription, error)
	Delete(ctx context.Context, id string) error
	Recover(ctx context.Context, id string, since time.Time, all bool) (events.Recovery, error)
}

// Scopes: creating, deleting and recovering a subscription, which send
// every user's events to a URL, take admin; reading them notify:read,
// like dead letters.
func (s *Server) registerEventSubs() {
	es := withService(s.opts.Events, "status events are not configured on this server")
	s.Handle("POST /v1/event-subscriptions", auth.ScopeAdmin, es(createEventSub))
	s.Handle("GET /v1/event-subscriptions", auth.ScopeNotifyRead, es(listEventSubs))
	s.Handle("GET /v1/event-subscriptions/{id}", auth.ScopeNotifyRead, es(getEventSub))
	s.Handle("DELETE /v1/event-subscriptions/{id}", auth.ScopeAdmin, es(deleteEventSub))
	s.Handle("POST /v1/event-subscriptions/{id}/recover", auth.ScopeAdmin, es(recoverEventSub))
}

type eventSubJSON struct {
	ID                   string   `json:"id"`
	URL                  string   `json:"url"`
	Events               []string `json:"events"`
	Secret               string   `json:"secret,omitempty"`
	DisableAfter         string   `json:"disable_after"`
	DisableAfterFailures int      `json:"disable_after_failures"`
	CreatedAt            string   `json:"created_at"`
	// Status is enabled, failing (a failure run is going on) or disabled.
	Status         string `json:"status"`
	Failures       int    `json:"failures"`
	FirstFailureAt string `json:"first_failure_at,omitempty"`
	LastFailureAt  string `json:"last_failure_at,omitempty"`
	LastError      string `json:"last_error,omitempty"`
	LastSuccessAt  string `json:"last_success_at,omitempty"`
	DisabledAt     string `json:"disabled_at,omitempty"`
	DisabledReason string `json:"disabled_reason,omitempty"`
}

func eventSubOut(sub events.Subscription) eventSubJSON {
	status := "enabled"
	switch {
	case !sub.DisabledAt.IsZero():
		status = "disabled"
	case sub.Failures > 0:
		status = "failing"
	}
	return eventSubJSON{ID: sub.ID, URL: sub.URL, Events: sub.Events, DisableAfter: sub.DisableAfter.String(),
		DisableAfterFailures: sub.DisableAfterFailures, CreatedAt: timestamp(sub.CreatedAt), Status: status,
		Failures: sub.Failures, FirstFailureAt: timestamp(sub.FirstFailureAt), LastFailureAt: timestamp(sub.LastFailureAt),
		LastError: sub.LastError, LastSuccessAt: timestamp(sub.LastSuccessAt), DisabledAt: timestamp(sub.DisabledAt),
		DisabledReason: sub.DisabledReason}
}

func createEventSub(svc EventSubscriptions, w http.ResponseWriter, r *http.Request) error {
	var body struct {
		URL                  string   `json:"url"`
		Events               []string `json:"events"`
		DisableAfter         *string  `json:"disable_after"`
		DisableAfterFailures *int     `json:"disable_after_failures"`
	}
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	n := events.NewSubscription{URL: body.URL, Events: body.Events, DisableAfterFailures: body.DisableAfterFailures}
	if body.DisableAfter != nil {
		d, err := time.ParseDuration(*body.DisableAfter)
		if err != nil {
			return fieldErrors(apperr.Unprocessable, "disable_after", "must be a duration such as 120h or 30m (0 never)")
		}
		n.DisableAfter = &d
	}
	sub, err := svc.Create(r.Context(), n)
	if err != nil {
		return err
	}
	out := eventSubOut(sub)
	out.Secret = sub.Secret
	w.Header().Set("Location", "/v1/event-subscriptions/"+sub.ID)
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func listEventSubs(svc EventSubscriptions, w http.ResponseWriter, r *http.Request) error {
	subs, err := svc.Subscriptions(r.Context())
	if err != nil {
		return err
	}
	writeItems(w, subs, eventSubOut)
	return nil
}

func getEventSub(svc EventSubscriptions, w http.ResponseWriter, r *http.Request) error {
	sub, err := svc.Subscription(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, eventSubOut(sub))
	return nil
}

func deleteEventSub(svc EventSubscriptions, w http.ResponseWriter, r *http.Request) error {
	if err := svc.Delete(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func recoverEventSub(svc EventSubscriptions, w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query().Get("since")
	since, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return fieldErrors(apperr.Invalid, "since", "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
	}
	all := false
	switch r.URL.Query().Get("all") {
	case "", "false":
	case "true":
		all = true
	default:
		return fieldErrors(apperr.Invalid, "all", "must be true or false")
	}
	rec, err := svc.Recover(r.Context(), r.PathValue("id"), since, all)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"id": r.PathValue("id"), "queued": rec.Queued, "more": rec.More,
		"until": timestamp(rec.Until)})
	return nil
}
