package httpapi

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/notify"
)

type templateJSON struct {
	Type      string                               `json:"type"`
	Category  notify.Category                      `json:"category"`
	Channels  map[string]map[string]notify.Content `json:"channels"`
	Default   bool                                 `json:"default"`
	UpdatedAt string                               `json:"updated_at,omitempty"`
}

func getTemplate(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
	t, err := svc.Template(r.Context(), r.PathValue("type"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, templateJSON{Type: t.Type, Category: t.Category, Channels: t.Channels, Default: t.Default, UpdatedAt: timestamp(t.UpdatedAt)})
	return nil
}

func putTemplate(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Category notify.Category                      `json:"category"`
		Channels map[string]map[string]notify.Content `json:"channels"`
	}
	if err := decodeJSON(r, &b); err != nil {
		return err
	}
	t, err := svc.PutTemplate(r.Context(), notify.Template{Type: r.PathValue("type"), Category: b.Category, Channels: b.Channels})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, templateJSON{Type: t.Type, Category: t.Category, Channels: t.Channels, UpdatedAt: timestamp(t.UpdatedAt)})
	return nil
}
