package httpapi

import (
	"net/http"

	"github.com/sluicehq/sluice/internal/notify"
)

// settingsBody is the body of PUT /v1/users/{id}/settings; every member is
// optional (absent switches default to on).
type settingsBody struct {
	Channels   map[notify.Channel]bool  `json:"channels"`
	Categories map[notify.Category]bool `json:"categories"`
	Contacts   notify.Contacts          `json:"contacts"`
	Locale     string                   `json:"locale"`
	Timezone   string                   `json:"timezone"`
	QuietHours *notify.QuietHours       `json:"quiet_hours"`
}

type settingsJSON struct {
	UserID     string                   `json:"user_id"`
	Channels   map[notify.Channel]bool  `json:"channels"`
	Categories map[notify.Category]bool `json:"categories"`
	Contacts   notify.Contacts          `json:"contacts"`
	Locale     string                   `json:"locale"`
	Timezone   string                   `json:"timezone"`
	QuietHours *notify.QuietHours       `json:"quiet_hours"`
	UpdatedAt  string                   `json:"updated_at,omitempty"`
}

func toSettingsJSON(user string, st notify.Settings) settingsJSON {
	out := settingsJSON{UserID: user, Channels: st.Channels, Categories: st.Categories, Contacts: st.Contacts,
		Locale: st.Locale, Timezone: st.Timezone, UpdatedAt: timestamp(st.UpdatedAt)}
	if out.Timezone == "" {
		out.Timezone = "UTC"
	}
	if st.QuietHours != (notify.QuietHours{}) {
		q := st.QuietHours
		out.QuietHours = &q
	}
	return out
}

func getSettings(svc settingsStore, w http.ResponseWriter, r *http.Request) error {
	st, err := svc.Settings(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toSettingsJSON(r.PathValue("id"), st))
	return nil
}

func putSettings(svc settingsStore, w http.ResponseWriter, r *http.Request) error {
	var b settingsBody
	if err := decodeJSON(r, &b); err != nil {
		return err
	}
	st := notify.Settings{Channels: b.Channels, Categories: b.Categories, Contacts: b.Contacts, Locale: b.Locale, Timezone: b.Timezone}
	if b.QuietHours != nil {
		st.QuietHours = *b.QuietHours
	}
	if st.Timezone == "UTC" {
		st.Timezone = ""
	}
	st, err := svc.PutSettings(r.Context(), r.PathValue("id"), st)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toSettingsJSON(r.PathValue("id"), st))
	return nil
}
