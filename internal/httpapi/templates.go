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
	// Digest and Escalation are the type's rules (notify.DigestRule,
	// notify.EscalationRule); absent for none.
	Digest     *notify.DigestRule     `json:"digest,omitempty"`
	Escalation *notify.EscalationRule `json:"escalation,omitempty"`
	TrackLinks bool                   `json:"track_links,omitempty"`
}

func getTemplate(svc templateStore, w http.ResponseWriter, r *http.Request) error {
	t, err := svc.Template(r.Context(), r.PathValue("type"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, templateJSON{Type: t.Type, Category: t.Category, Channels: t.Channels, Default: t.Default, UpdatedAt: timestamp(t.UpdatedAt),
		Digest: t.Digest, Escalation: t.Escalation, TrackLinks: t.TrackLinks})
	return nil
}

func putTemplate(svc templateStore, w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Category   notify.Category                      `json:"category"`
		Channels   map[string]map[string]notify.Content `json:"channels"`
		Digest     *notify.DigestRule                   `json:"digest"`
		Escalation *notify.EscalationRule               `json:"escalation"`
		TrackLinks bool                                 `json:"track_links"`
	}
	if err := decodeJSON(r, &b); err != nil {
		return err
	}
	t, err := svc.PutTemplate(r.Context(), notify.Template{Type: r.PathValue("type"), Category: b.Category, Channels: b.Channels,
		Digest: b.Digest, Escalation: b.Escalation, TrackLinks: b.TrackLinks})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, templateJSON{Type: t.Type, Category: t.Category, Channels: t.Channels, UpdatedAt: timestamp(t.UpdatedAt),
		Digest: t.Digest, Escalation: t.Escalation, TrackLinks: t.TrackLinks})
	return nil
}
