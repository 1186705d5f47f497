package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/notify"
)

// NotifyService is what the notification routes need of the notification
// service (notify.Service).
type NotifyService interface {
	Send(ctx context.Context, req notify.Request) (notify.Accepted, error)
	PrefetchSettings(ctx context.Context, users []string) error
	Notification(ctx context.Context, id string) (notify.Record, error)
	UserNotifications(ctx context.Context, user, cursor string, limit int) ([]notify.Record, string, error)
	Settings(ctx context.Context, user string) (notify.Settings, error)
	PutSettings(ctx context.Context, user string, s notify.Settings) (notify.Settings, error)
	Template(ctx context.Context, typ string) (notify.Template, error)
	PutTemplate(ctx context.Context, t notify.Template) (notify.Template, error)
	DeadLetters(ctx context.Context, cursor string, limit int) ([]notify.DeadLetter, string, error)
	ReplayDeadLetter(ctx context.Context, id string) (notify.Delivery, error)
	Callback(ctx context.Context, provider string, c notify.Callback) error
	Outbox(ctx context.Context, f notify.OutboxFilter, cursor string, limit int) ([]notify.OutboxEntry, string, error)
}

// maxBatch is the most notifications one batch request may carry.
const maxBatch = 1000

// Scopes of the notification routes: sending and managing a user's
// settings take notify:send (the calling application owns its users'
// preferences), reading takes notify:read, and changing templates or
// replaying dead letters, which affect every user, take admin.
func (s *Server) registerNotify() {
	ns := s.withNotify
	s.Handle("POST /v1/notifications", auth.ScopeNotifySend, ns(sendNotification))
	s.Handle("POST /v1/notifications/batch", auth.ScopeNotifySend, ns(s.sendBatch))
	s.Handle("GET /v1/notifications/{id}", auth.ScopeNotifyRead, ns(getNotification))
	s.Handle("GET /v1/users/{id}/notifications", auth.ScopeNotifyRead, ns(userNotifications))
	s.Handle("GET /v1/users/{id}/settings", auth.ScopeNotifyRead, ns(getSettings))
	s.Handle("PUT /v1/users/{id}/settings", auth.ScopeNotifySend, ns(putSettings))
	s.Handle("GET /v1/templates/{type}", auth.ScopeNotifyRead, ns(getTemplate))
	s.Handle("PUT /v1/templates/{type}", auth.ScopeAdmin, ns(putTemplate))
	s.Handle("GET /v1/dead-letters", auth.ScopeNotifyRead, ns(deadLetters))
	s.Handle("POST /v1/dead-letters/{id}/replay", auth.ScopeAdmin, ns(replayDeadLetter))
	s.Handle("GET /v1/outbox", auth.ScopeNotifyRead, ns(outbox))
}

// withNotify adapts h, a handler of the notification service's routes, to
// a route: it hands h the service, or answers 503 while notifications are
// not configured (Options.Notify is nil), so h never checks.
func (s *Server) withNotify(h func(svc NotifyService, w http.ResponseWriter, r *http.Request) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.opts.Notify == nil {
			return apperr.New(apperr.Unavailable, "notifications are not configured on this server")
		}
		return h(s.opts.Notify, w, r)
	}
}

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
			return req, fieldErr(apperr.Unprocessable, "request_id", "differs from the Idempotency-Key header")
		}
		req.RequestID = idemKey
	}
	if b.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339Nano, b.ExpiresAt)
		if err != nil {
			return req, fieldErr(apperr.Invalid, "expires_at", "must be an RFC 3339 time such as 2026-12-01T10:00:00Z")
		}
		req.ExpiresAt = t
	}
	for _, ch := range b.Channels {
		req.Channels = append(req.Channels, notify.Channel(ch))
	}
	return req, nil
}

func fieldErr(code apperr.Code, field, detail string) error {
	return &apperr.Error{Code: code, Message: field + " " + detail, Fields: []apperr.FieldError{{Field: field, Detail: detail}}}
}

type acceptedJSON struct {
	NotificationID string `json:"notification_id"`
	Status         string `json:"status"`
}

func sendNotification(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
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

func (s *Server) sendBatch(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Notifications []notificationRequest `json:"notifications"`
	}
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	if n := len(body.Notifications); n == 0 || n > maxBatch {
		return fieldErr(apperr.Unprocessable, "notifications", "must hold 1 to "+strconv.Itoa(maxBatch)+" notifications")
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

func getNotification(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
	rec, err := svc.Notification(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toRecordJSON(rec))
	return nil
}

func userNotifications(svc NotifyService, w http.ResponseWriter, r *http.Request) error {
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

// limitParam reads ?limit= (0 when absent: the service's default).
func limitParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > notify.MaxPageSize {
		return 0, fieldErr(apperr.Invalid, "limit", "must be an integer from 1 to "+strconv.Itoa(notify.MaxPageSize))
	}
	return n, nil
}
