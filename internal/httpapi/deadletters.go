package httpapi

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/notify"
)

type deadLetterJSON struct {
	ID             string         `json:"id"`
	NotificationID string         `json:"notification_id"`
	Channel        notify.Channel `json:"channel"`
	UserID         string         `json:"user_id"`
	Error          string         `json:"error"`
	Attempts       int            `json:"attempts"`
	CreatedAt      string         `json:"created_at"`
	ReplayedAt     string         `json:"replayed_at,omitempty"`
}

func deadLetters(svc deadLetterQueue, w http.ResponseWriter, r *http.Request) error {
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	dls, next, err := svc.DeadLetters(r.Context(), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]deadLetterJSON, len(dls))
	for i, dl := range dls {
		items[i] = deadLetterJSON{ID: dl.ID, NotificationID: dl.NotificationID, Channel: dl.Channel, UserID: dl.UserID,
			Error: dl.Error, Attempts: dl.Attempts, CreatedAt: timestamp(dl.CreatedAt), ReplayedAt: timestamp(dl.ReplayedAt)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
	return nil
}

func replayDeadLetter(svc deadLetterQueue, w http.ResponseWriter, r *http.Request) error {
	d, err := svc.ReplayDeadLetter(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"id": r.PathValue("id"), "notification_id": d.NotificationID,
		"channel": d.Channel, "status": d.Status})
	return nil
}
