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
// service: one role per group of routes, each handler asking only for its
// own (*notify.Service is the one implementation).
type NotifyService interface {
	notifySender
	notificationReader
	settingsStore
	templateStore
	deadLetterQueue
	outboxReader
	callbackReceiver
	emailTracker
}

// The roles of NotifyService.
type (
	// notifySender takes notifications in and cancels them.
	notifySender interface {
		Send(ctx context.Context, req notify.Request) (notify.Accepted, error)
		PrefetchSettings(ctx context.Context, users []string) error
		Cancel(ctx context.Context, id string) (notify.Record, error)
	}
	// notificationReader reads notifications back.
	notificationReader interface {
		Notification(ctx context.Context, id string) (notify.Record, error)
		UserNotifications(ctx context.Context, user, cursor string, limit int) ([]notify.Record, string, error)
	}
	// settingsStore keeps a user's preferences.
	settingsStore interface {
		Settings(ctx context.Context, user string) (notify.Settings, error)
		PutSettings(ctx context.Context, user string, s notify.Settings) (notify.Settings, error)
	}
	// templateStore keeps the message templates.
	templateStore interface {
		Template(ctx context.Context, typ string) (notify.Template, error)
		PutTemplate(ctx context.Context, t notify.Template) (notify.Template, error)
		Templates(ctx context.Context) ([]notify.Template, error)
		DeleteTemplate(ctx context.Context, typ string) error
	}
	// deadLetterQueue lists and replays dead letters.
	deadLetterQueue interface {
		DeadLetters(ctx context.Context, cursor string, limit int) ([]notify.DeadLetter, string, error)
		ReplayDeadLetter(ctx context.Context, id string) (notify.Delivery, error)
	}
	// outboxReader lists what the built-in outbox received.
	outboxReader interface {
		Outbox(ctx context.Context, f notify.OutboxFilter, cursor string, limit int) ([]notify.OutboxEntry, string, error)
	}
	// callbackReceiver takes providers' delivery receipts.
	callbackReceiver interface {
		Callback(ctx context.Context, provider string, c notify.Callback) error
	}
)

// Scopes of the notification routes: sending and managing a user's
// settings take notify:send (the calling application owns its users'
// preferences), reading takes notify:read, and changing templates or
// replaying dead letters, which affect every user, take admin.
func (s *Server) registerNotify() {
	n := s.opts.Notify // each group of routes is handed its role of it
	send, read := withService[notifySender](n, noNotify), withService[notificationReader](n, noNotify)
	settings, templates := withService[settingsStore](n, noNotify), withService[templateStore](n, noNotify)
	dead, box := withService[deadLetterQueue](n, noNotify), withService[outboxReader](n, noNotify)
	s.Handle("POST /v1/notifications", auth.ScopeNotifySend, send(sendNotification))
	s.Handle("POST /v1/notifications/batch", auth.ScopeNotifySend, send(s.sendBatch))
	s.Handle("GET /v1/notifications/{id}", auth.ScopeNotifyRead, read(getNotification))
	s.Handle("GET /v1/users/{id}/notifications", auth.ScopeNotifyRead, read(userNotifications))
	s.Handle("GET /v1/users/{id}/settings", auth.ScopeNotifyRead, settings(getSettings))
	s.Handle("PUT /v1/users/{id}/settings", auth.ScopeNotifySend, settings(putSettings))
	s.Handle("GET /v1/templates/{type}", auth.ScopeNotifyRead, templates(getTemplate))
	s.Handle("GET /v1/templates", auth.ScopeNotifyRead, templates(listTemplates))
	s.Handle("PUT /v1/templates/{type}", auth.ScopeAdmin, templates(putTemplate))
	s.Handle("DELETE /v1/templates/{type}", auth.ScopeAdmin, templates(deleteTemplate))
	s.Handle("GET /v1/dead-letters", auth.ScopeNotifyRead, dead(deadLetters))
	s.Handle("POST /v1/dead-letters/{id}/replay", auth.ScopeAdmin, dead(replayDeadLetter))
	s.Handle("GET /v1/outbox", auth.ScopeNotifyRead, box(outbox))
	s.Handle("DELETE /v1/notifications/{id}", auth.ScopeNotifySend, send(cancelNotification))
	s.Handle("GET /e/{token}", public, withService[emailTracker](n, noNotify)(s.emailHit))
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

// noNotify is what the notification routes answer (503) on a server
// without the notification service.
const noNotify = "notifications are not configured on this server"
