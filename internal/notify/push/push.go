// Package push routes push notifications to the service a token belongs
// to: Firebase Cloud Messaging or the Apple Push Notification service.
package push

import (
	"context"
	"strings"

	"github.com/sluicehq/sluice/internal/notify"
)

// Router sends each push token to the service it belongs to: a token
// written "apns:..." or "fcm:..." says so; otherwise 64 hex digits is an
// APNs device token and anything else an FCM registration token. With one
// service configured, every token goes to it.
//
// At least one of FCM and APNs must be set; the zero value is not usable.
// A Router is safe for concurrent use when its providers are.
type Router struct {
	// Alias, if set, is the router's Name (a backup router is
	// "push-backup").
	Alias string
	// FCM sends to FCM registration tokens. If nil, APNs takes every
	// token not written "fcm:...".
	FCM notify.Provider
	// APNs sends to APNs device tokens. If nil, FCM takes every token not
	// written "apns:...".
	APNs notify.Provider
}

var _ notify.Provider = (*Router)(nil)

// Name is Alias when set, else the one configured service's name, or
// "push" when both are.
func (r *Router) Name() string {
	switch {
	case r.Alias != "":
		return r.Alias
	case r.FCM == nil:
		return r.APNs.Name()
	case r.APNs == nil:
		return r.FCM.Name()
	}
	return "push"
}

// NeedsContact reports true: a push needs a token.
func (r *Router) NeedsContact() bool { return true }

// Send passes m to the service m.To belongs to, with the "apns:" or "fcm:"
// prefix removed, and names that service in the receipt. A token written
// for a service that is not configured is a permanent error.
func (r *Router) Send(ctx context.Context, m notify.Message) (notify.Receipt, error) {
	p, token := r.route(m.To)
	if p == nil {
		return notify.Receipt{}, notify.Permanentf("no push service takes token %.12q", m.To)
	}
	m.To = token
	rc, err := p.Send(ctx, m)
	if err == nil {
		rc.Provider = p.Name()
	}
	return rc, err
}

// route picks the provider for the token to and the token it is sent.
func (r *Router) route(to string) (notify.Provider, string) {
	if t, ok := strings.CutPrefix(to, "apns:"); ok {
		return r.APNs, t
	}
	if t, ok := strings.CutPrefix(to, "fcm:"); ok {
		return r.FCM, t
	}
	switch {
	case r.APNs == nil:
		return r.FCM, to
	case r.FCM == nil:
		return r.APNs, to
	case len(to) == 64 && strings.Trim(strings.ToLower(to), "0123456789abcdef") == "":
		return r.APNs, to
	}
	return r.FCM, to
}
