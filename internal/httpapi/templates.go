package httpapi

import (
	"maps"
	"net/http"
	"slices"

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

// templateItemJSON is one type in the list of templates: its channels and
// locales by name, not their text (GET /v1/templates/{type} has that).
type templateItemJSON struct {
	Type     string          `json:"type"`
	Category notify.Category `json:"category"`
	Channels []string        `json:"channels"`
	Locales  []string        `json:"locales"`
	Default  bool            `json:"default"`
	// Shipped is a type Sluice ships a template for: a delete resets it
	// rather than removing it.
	Shipped   bool   `json:"shipped"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

// listTemplates answers every type callers may send, shipped and custom,
// sorted by type; default is true while a shipped type has no override.
func listTemplates(svc templateStore, w http.ResponseWriter, r *http.Request) error {
	ts, err := svc.Templates(r.Context())
	if err != nil {
		return err
	}
	shipped := notify.DefaultTypes()
	writeItems(w, ts, func(t notify.Template) templateItemJSON {
		item := templateItemJSON{Type: t.Type, Category: t.Category, Channels: slices.Sorted(maps.Keys(t.Channels)),
			Locales: []string{}, Default: t.Default, Shipped: slices.Contains(shipped, t.Type), UpdatedAt: timestamp(t.UpdatedAt)}
		for _, byLocale := range t.Channels {
			for l := range byLocale {
				if !slices.Contains(item.Locales, l) {
					item.Locales = append(item.Locales, l)
				}
			}
		}
		slices.Sort(item.Locales)
		return item
	})
	return nil
}

// deleteTemplate puts a shipped type back to its shipped template or
// removes a custom type; 404 when no template of the type is stored.
func deleteTemplate(svc templateStore, w http.ResponseWriter, r *http.Request) error {
	if err := svc.DeleteTemplate(r.Context(), r.PathValue("type")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
