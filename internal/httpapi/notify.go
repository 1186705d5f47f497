package httpapi

import (
	"context"
	"net/http"
	"strconv"
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
	Cancel(ctx context.Context, id string) (notify.Record, error)
}

// Scopes of the notification routes: sending and managing a user's
// settings take notify:send (the calling application owns its users'
// preferences), reading takes notify:read, and changing templates or
// replaying dead letters, which affect every user, take admin.
func (s *Server) registerNotify() {
	ns := s.withNotify()
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
	s.Handle("DELETE /v1/notifications/{id}", auth.ScopeNotifySend, ns(cancelNotification))
}

// limitParam reads ?limit= (0 when absent: the service's default).
func limitParam(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > notify.MaxPageSize {
		return 0, fieldErrors(apperr.Invalid, "limit", "must be an integer from 1 to "+strconv.Itoa(notify.MaxPageSize))
	}
	return n, nil
}

// timestamp formats t as RFC 3339 in UTC with microseconds; zero is "".
func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

// withNotify adapts the notification routes' handlers: see withService.
func (s *Server) withNotify() func(serviceHandler[NotifyService]) handlerFunc {
	return withService(s.opts.Notify, "notifications are not configured on this server")
}
