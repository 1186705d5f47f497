package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// maxBatch is the most notifications one batch request may carry.
const maxBatch = 1000

// notificationRequest is the body of POST /v1/notifications.
type notificationRequest struct {
	RequestID string          `json:"request_id"`
	UserID    string          `json:"user_id"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	ExpiresAt string          `json:"expires_at"`
	Channels  []string        `json:"channels"`
}

// toRequest converts the body; malformed values (not rule violations) are
// Invalid, naming the field.
func (b notificationRequest) toRequest(idemKey string) (notify.Request, error) {
	req := notify.Request{RequestID: b.RequestID, UserID: b.UserID, Type: b.Type, Data: b.Data}
	if idemKey != "" {
		if b.RequestID != "" && b.RequestID != idemKey {
			return req, fieldErrors(apperr.Unprocessable, "request_id", "differs from the Idempotency-Key header")
		}
		req.RequestID = idemKey
	}
	if b.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339Nano, b.ExpiresAt)
		if err != nil {
			return req, fieldErrors(apperr.Invalid, "expires_at", "must be an RFC 3339 time such as 2026-12-01T10:00:00Z")
		}
		req.ExpiresAt = t
	}
	for _, ch := range b.Channels {
		req.Channels = append(req.Channels, notify.Channel(ch))
	}
	return req, nil
}

type acceptedJSON struct {
	NotificationID string `json:"notification_id"`
	Status         string `json:"status"`
}

func sendNotification(svc notifySender, w http.ResponseWriter, r *http.Request) error {
	var body notificationRequest
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	req, err := body.toRequest(strings.TrimSpace(r.Header.Get("Idempotency-Key")))
	if err != nil {
		return err
	}
	a, err := svc.Send(r.Context(), req)
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if a.Duplicate {
		status = http.StatusOK
	}
	w.Header().Set("Location", "/v1/notifications/"+a.NotificationID)
	writeJSON(w, status, acceptedJSON{NotificationID: a.NotificationID, Status: "accepted"})
	return nil
}

// batchResult is one item of a batch answer: the notification, or the
// problem that refused it.
type batchResult struct {
	NotificationID string   `json:"notification_id,omitempty"`
	Status         string   `json:"status"` // accepted, duplicate or refused
	Error          *Problem `json:"error,omitempty"`
}

func (s *Server) sendBatch(svc notifySender, w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Notifications []notificationRequest `json:"notifications"`
	}
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	if n := len(body.Notifications); n == 0 || n > maxBatch {
		return fieldErrors(apperr.Unprocessable, "notifications", "must hold 1 to "+strconv.Itoa(maxBatch)+" notifications")
	}
	results := make([]batchResult, len(body.Notifications))
	users := make([]string, 0, len(body.Notifications))
	for _, item := range body.Notifications {
		users = append(users, item.UserID)
	}
	// A few queries for every user's settings instead of one per item; if
	// they fail, each item reads its own.
	_ = svc.PrefetchSettings(r.Context(), users)
	// Items run concurrently, so the store's group commit saves many in
	// one transaction; the answer waits for every one.
	reqID := w.Header().Get(headerRequestID)
	sem := make(chan struct{}, 128)
	var wg sync.WaitGroup
	for i, item := range body.Notifications {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			req, err := item.toRequest("")
			var a notify.Accepted
			if err == nil {
				a, err = svc.Send(r.Context(), req)
			}
			switch {
			case err != nil:
				p := problemOf(err)
				if p.Status >= 500 {
					s.log.LogAttrs(r.Context(), slog.LevelError, "batch item failed",
						slog.String(logKeyRequestID, reqID), slog.Int("item", i), slog.Any("error", err))
				}
				results[i] = batchResult{Status: "refused", Error: &p}
			case a.Duplicate:
				results[i] = batchResult{NotificationID: a.NotificationID, Status: "duplicate"}
			default:
				results[i] = batchResult{NotificationID: a.NotificationID, Status: "accepted"}
			}
		})
	}
	wg.Wait()
	counts := map[string]int{"accepted": 0, "duplicate": 0, "refused": 0}
	for _, res := range results {
		counts[res.Status]++
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": results, "accepted": counts["accepted"],
		"duplicates": counts["duplicate"], "refused": counts["refused"]})
	return nil
}

func getNotification(svc notificationReader, w http.ResponseWriter, r *http.Request) error {
	rec, err := svc.Notification(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toRecordJSON(rec))
	return nil
}

func userNotifications(svc notificationReader, w http.ResponseWriter, r *http.Request) error {
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	recs, next, err := svc.UserNotifications(r.Context(), r.PathValue("id"), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]recordJSON, len(recs))
	for i, rec := range recs {
		items[i] = toRecordJSON(rec)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
	return nil
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
	// ClickedAt and OpenedAt are an email's first click and open by a
	// person (bot hits never set them).
	ClickedAt string `json:"clicked_at,omitempty"`
	OpenedAt  string `json:"opened_at,omitempty"`
}

type hopJSON struct {
	Provider string         `json:"provider"`
	Channel  notify.Channel `json:"channel"`
	Result   string         `json:"result"`
	Error    string         `json:"error,omitempty"`
	To       string         `json:"to,omitempty"`
	At       string         `json:"at"`
}

type linkJSON struct {
	Code         string `json:"code"`
	ShortURL     string `json:"short_url"`
	URL          string `json:"url"`
	Clicks       int64  `json:"clicks"`
	BotHits      int64  `json:"bot_hits"`
	FirstClickAt string `json:"first_click_at,omitempty"`
	Conversions  int64  `json:"conversions"`
}

func toDeliveryJSON(d notify.Delivery) deliveryJSON {
	out := deliveryJSON{Channel: d.Channel, Provider: d.Provider, Status: d.Status, Attempts: d.Attempts,
		Error: d.Error, UpdatedAt: timestamp(d.UpdatedAt), NextAt: timestamp(d.NextAttemptAt), ProviderMessageID: d.ProviderMessageID,
		ClickedAt: timestamp(d.ClickedAt), OpenedAt: timestamp(d.OpenedAt)}
	for _, h := range d.Hops {
		out.Hops = append(out.Hops, hopJSON{Provider: h.Provider, Channel: h.Channel, Result: h.Result, Error: h.Error, To: h.To, At: timestamp(h.At)})
	}
	for _, l := range d.Links {
		out.Links = append(out.Links, linkJSON{Code: l.Code, ShortURL: l.ShortURL, URL: l.URL, Clicks: l.Clicks,
			BotHits: l.BotHits, FirstClickAt: timestamp(l.FirstClickAt), Conversions: l.Conversions})
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
	Digests    []digestJSON     `json:"digests,omitempty"`
}

func toRecordJSON(r notify.Record) recordJSON {
	out := recordJSON{ID: r.ID, RequestID: r.RequestID, UserID: r.UserID, Type: r.Type, Category: r.Category,
		Data: r.Data, Channels: r.Channels, ExpiresAt: timestamp(r.ExpiresAt), CreatedAt: timestamp(r.CreatedAt),
		Deliveries: make([]deliveryJSON, len(r.Deliveries))}
	for i, d := range r.Deliveries {
		out.Deliveries[i] = toDeliveryJSON(d)
	}
	for _, d := range r.Digests {
		out.Digests = append(out.Digests, toDigestJSON(d))
	}
	return out
}
