package httpapi

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/notify"
)

// canceledJSON answers DELETE /v1/notifications/{id}: the notification as
// it stands after the cancel, and what the cancel achieved (see
// notify.CancelOutcome), both read from the deliveries' statuses, so a
// repeated DELETE answers the same.
type canceledJSON struct {
	recordJSON
	Outcome string `json:"outcome"`
}

// cancelNotification answers 200 whenever the notification exists, even
// when nothing could be canceled (outcome not_canceled): the deliveries
// say what happened to each, which a 409 could not carry as plainly.
func cancelNotification(svc notifySender, w http.ResponseWriter, r *http.Request) error {
	rec, err := svc.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, canceledJSON{recordJSON: toRecordJSON(rec), Outcome: notify.CancelOutcome(rec)})
	return nil
}
