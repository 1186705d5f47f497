package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// timestamp formats t as RFC 3339 in UTC with microseconds; zero is "".
func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

type deliveryJSON struct {
	Channel   notify.Channel `json:"channel"`
	Provider  string         `json:"provider"`
	Status    notify.Status  `json:"status"`
	Attempts  int            `json:"attempts"`
	Error     string         `json:"error"`
	UpdatedAt string         `json:"updated_at"`
	NextAt    string         `json:"next_attempt_at,omitempty"`
	// ProviderMessageID is the provider's id for the message (Twilio SID,
	// FCM name, apns-id, Message-ID).
	ProviderMessageID string     `json:"provider_message_id,omitempty"`
	Hops              []hopJSON  `json:"hops,omitempty"`
	Links             []linkJSON `json:"links,omitempty"`
}

type hopJSON struct {
	Provider string         `json:"provider"`
	Channel  notify.Channel `json:"channel"`
	Result   string         `json:"result"`
	Error    string         `json:"error,omitempty"`
	At       string         `json:"at"`
}

type linkJSON struct {
	Code         string `json:"code"`
	ShortURL     string `json:"short_url"`
	URL          string `json:"url"`
	Clicks       int64  `json:"clicks"`
	BotHits      int64  `json:"bot_hits"`
	FirstClickAt string `json:"first_click_at,omitempty"`
}

func toDeliveryJSON(d notify.Delivery) deliveryJSON {
	out := deliveryJSON{Channel: d.Channel, Provider: d.Provider, Status: d.Status, Attempts: d.Attempts,
		Error: d.Error, UpdatedAt: timestamp(d.UpdatedAt), NextAt: timestamp(d.NextAttemptAt), ProviderMessageID: d.ProviderMessageID}
	for _, h := range d.Hops {
		out.Hops = append(out.Hops, hopJSON{Provider: h.Provider, Channel: h.Channel, Result: h.Result, Error: h.Error, At: timestamp(h.At)})
	}
	for _, l := range d.Links {
		out.Links = append(out.Links, linkJSON{Code: l.Code, ShortURL: l.ShortURL, URL: l.URL, Clicks: l.Clicks,
			BotHits: l.BotHits, FirstClickAt: timestamp(l.FirstClickAt)})
	}
	return out
}

type recordJSON struct {
	ID         string           `json:"id"`
	RequestID  string           `json:"request_id,omitempty"`
	UserID     string           `json:"user_id"`
	Type       string           `json:"type"`
	Category   notify.Category  `json:"category"`
	Data       json.RawMessage  `json:"data"`
	Channels   []notify.Channel `json:"channels,omitempty"`
	ExpiresAt  string           `json:"expires_at,omitempty"`
	CreatedAt  string           `json:"created_at"`
	Deliveries []deliveryJSON   `json:"deliveries"`
}

func toRecordJSON(r notify.Record) recordJSON {
	out := recordJSON{ID: r.ID, RequestID: r.RequestID, UserID: r.UserID, Type: r.Type, Category: r.Category,
		Data: r.Data, Channels: r.Channels, ExpiresAt: timestamp(r.ExpiresAt), CreatedAt: timestamp(r.CreatedAt),
		Deliveries: make([]deliveryJSON, len(r.Deliveries))}
	for i, d := range r.Deliveries {
		out.Deliveries[i] = toDeliveryJSON(d)
	}
	return out
}

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

func getSettings(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
	st, err := svc.Settings(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toSettingsJSON(r.PathValue("id"), st))
	return nil
}

func putSettings(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
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

func deadLetters(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
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

func replayDeadLetter(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
	d, err := svc.ReplayDeadLetter(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"id": r.PathValue("id"), "notification_id": d.NotificationID,
		"channel": d.Channel, "status": d.Status})
	return nil
}

type outboxJSON struct {
	NotificationID string         `json:"notification_id"`
	Channel        notify.Channel `json:"channel"`
	UserID         string         `json:"user_id"`
	To             string         `json:"to"`
	Subject        string         `json:"subject"`
	Body           string         `json:"body"`
	Attempt        int            `json:"attempt"`
	CreatedAt      string         `json:"created_at"`
}

func outbox(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
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
			Subject: e.Subject, Body: e.Body, Attempt: e.Attempt, CreatedAt: timestamp(e.CreatedAt)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
	return nil
}
