package httpapi

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/notify"
)

type outboxJSON struct {
	NotificationID string         `json:"notification_id"`
	Channel        notify.Channel `json:"channel"`
	UserID         string         `json:"user_id"`
	To             string         `json:"to"`
	Subject        string         `json:"subject"`
	Body           string         `json:"body"`
	HTML           string         `json:"html,omitempty"`
	Attempt        int            `json:"attempt"`
	CreatedAt      string         `json:"created_at"`
}

func outbox(svc outboxReader, w http.ResponseWriter, r *http.Request) error {
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := notify.OutboxFilter{UserID: q.Get("user_id"), NotificationID: q.Get("notification_id")}
	es, next, err := svc.Outbox(r.Context(), f, q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]outboxJSON, len(es))
	for i, e := range es {
		items[i] = outboxJSON{NotificationID: e.NotificationID, Channel: e.Channel, UserID: e.UserID, To: e.To,
			Subject: e.Subject, Body: e.Body, HTML: e.HTML, Attempt: e.Attempt, CreatedAt: timestamp(e.CreatedAt)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
	return nil
}
