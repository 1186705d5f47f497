package httpapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/audience"
)

// broadcastView is a broadcast as the API answers it.
type broadcastView struct {
	ID        string          `json:"id"`
	RequestID string          `json:"request_id"`
	Type      string          `json:"type"`
	To        audience.To     `json:"to"`
	Data      json.RawMessage `json:"data"`
	Channels  []string        `json:"channels"`
	SendAt    string          `json:"send_at"`
	Local     *audience.Local `json:"local,omitempty"`
	Status    string          `json:"status"`
	Targeted  int64           `json:"targeted"`
	Accepted  int64           `json:"accepted"`
	Skipped   int64           `json:"skipped"`
	Groups    []groupView     `json:"groups"`
	CreatedAt string          `json:"created_at"`
	UpdatedAt string          `json:"updated_at"`
}

type groupView struct {
	Timezone string `json:"timezone"`
	DueAt    string `json:"due_at"`
	Done     bool   `json:"done"`
}

func viewBroadcast(b audience.Broadcast) broadcastView {
	v := broadcastView{ID: b.ID, RequestID: b.RequestID, Type: b.Type, To: b.To, Data: b.Data, Channels: b.Channels,
		SendAt: timestamp(b.SendAt), Status: string(b.Status), Targeted: b.Targeted, Accepted: b.Accepted, Skipped: b.Skipped,
		Groups: make([]groupView, len(b.Groups)), CreatedAt: timestamp(b.CreatedAt), UpdatedAt: timestamp(b.UpdatedAt)}
	if v.Channels == nil {
		v.Channels = []string{}
	}
	if b.Local != (audience.Local{}) {
		v.Local = &b.Local
	}
	for i, g := range b.Groups {
		v.Groups[i] = groupView{g.Timezone, timestamp(g.DueAt), g.Done}
	}
	return v
}

// postBroadcast answers 202 {"broadcast_id"} for a new broadcast, 200 with
// the same body for a request_id seen before with the same request.
func postBroadcast(svc Audiences, w http.ResponseWriter, r *http.Request) error {
	var body struct {
		audience.Request
		SendAt json.RawMessage `json:"send_at"`
	}
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	req := body.Request
	switch raw := bytes.TrimSpace(body.SendAt); {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] == '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return fieldErrors(apperr.Invalid, "send_at", "must be an RFC 3339 time or {\"local\": \"HH:MM\", \"date\": \"YYYY-MM-DD\"}")
		}
		req.SendAt = t
	default:
		var l audience.Local
		if err := json.Unmarshal(raw, &l); err != nil || l.Time == "" || l.Date == "" {
			return fieldErrors(apperr.Invalid, "send_at", "must be an RFC 3339 time or {\"local\": \"HH:MM\", \"date\": \"YYYY-MM-DD\"}")
		}
		req.Local = &l
	}
	b, created, err := svc.Create(r.Context(), req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
		w.Header().Set("Location", "/v1/broadcasts/"+b.ID)
	}
	writeJSON(w, status, map[string]any{"broadcast_id": b.ID})
	return nil
}

func getBroadcast(svc Audiences, w http.ResponseWriter, r *http.Request) error {
	b, err := svc.Broadcast(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewBroadcast(b))
	return nil
}

// listBroadcasts answers a page of broadcasts newest first:
// {"items": [...], "next_cursor": ...} ("" on the last page).
func listBroadcasts(svc Audiences, w http.ResponseWriter, r *http.Request) error {
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	limit = cmp.Or(limit, defaultAudiencePage)
	list, err := svc.Broadcasts(r.Context(), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]broadcastView, len(list))
	for i, b := range list {
		items[i] = viewBroadcast(b)
	}
	next := ""
	if len(list) == limit {
		next = list[len(list)-1].ID
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
	return nil
}

// cancelBroadcast cancels what a broadcast has not sent and answers it.
func cancelBroadcast(svc Audiences, w http.ResponseWriter, r *http.Request) error {
	b, err := svc.Cancel(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewBroadcast(b))
	return nil
}
