package httpapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"net/http"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/audience"
	"github.com/sluicehq/sluice/internal/auth"
)

// Audiences is what the topic and broadcast routes need of the audience
// domain (*audience.Service is the one implementation).
type Audiences interface {
	Subscribe(ctx context.Context, topic string, users []string) (int, error)
	Unsubscribe(ctx context.Context, topic, user string) error
	Subscribers(ctx context.Context, topic, after string, limit int) ([]string, error)
	Topics(ctx context.Context) ([]audience.Topic, error)
	Create(ctx context.Context, req audience.Request) (audience.Broadcast, bool, error)
	Broadcast(ctx context.Context, id string) (audience.Broadcast, error)
	Broadcasts(ctx context.Context, before string, limit int) ([]audience.Broadcast, error)
	Cancel(ctx context.Context, id string) (audience.Broadcast, error)
}

// noAudiences is what the topic and broadcast routes answer (503) on a
// server without them.
const noAudiences = "topics and broadcasts are not configured on this server"

// defaultAudiencePage is a page's size when the request names none.
const defaultAudiencePage = 100

// Scopes: as notifications, changing subscriptions and sending or
// canceling broadcasts take notify:send; reading them notify:read.
func (s *Server) registerAudiences() {
	a := withService(s.opts.Audiences, noAudiences)
	s.Handle("POST /v1/topics/{key}/subscribers", auth.ScopeNotifySend, a(subscribe))
	s.Handle("DELETE /v1/topics/{key}/subscribers/{user_id}", auth.ScopeNotifySend, a(unsubscribe))
	s.Handle("GET /v1/topics/{key}/subscribers", auth.ScopeNotifyRead, a(listSubscribers))
	s.Handle("GET /v1/topics", auth.ScopeNotifyRead, a(listTopics))
	s.Handle("POST /v1/broadcasts", auth.ScopeNotifySend, a(postBroadcast))
	s.Handle("GET /v1/broadcasts/{id}", auth.ScopeNotifyRead, a(getBroadcast))
	s.Handle("GET /v1/broadcasts", auth.ScopeNotifyRead, a(listBroadcasts))
	s.Handle("DELETE /v1/broadcasts/{id}", auth.ScopeNotifySend, a(cancelBroadcast))
}

func subscribe(svc Audiences, w http.ResponseWriter, r *http.Request) error {
	var body struct {
		UserIDs []string `json:"user_ids"`
	}
	if err := decodeJSON(r, &body); err != nil {
		return err
	}
	key := r.PathValue("key")
	n, err := svc.Subscribe(r.Context(), key, body.UserIDs)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"topic": key, "added": n})
	return nil
}

func unsubscribe(svc Audiences, w http.ResponseWriter, r *http.Request) error {
	if err := svc.Unsubscribe(r.Context(), r.PathValue("key"), r.PathValue("user_id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listSubscribers answers a page of a topic's subscribers in user id
// order: {"items": [...], "next_cursor": ...}, the cursor opaque ("" on
// the last page).
func listSubscribers(svc Audiences, w http.ResponseWriter, r *http.Request) error {
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	limit = cmp.Or(limit, defaultAudiencePage)
	after, err := base64.RawURLEncoding.DecodeString(r.URL.Query().Get("cursor"))
	if err != nil {
		return fieldErrors(apperr.Invalid, "cursor", "must be a cursor this API answered")
	}
	users, err := svc.Subscribers(r.Context(), r.PathValue("key"), string(after), limit)
	if err != nil {
		return err
	}
	next := ""
	if len(users) == limit {
		next = base64.RawURLEncoding.EncodeToString([]byte(users[len(users)-1]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": users, "next_cursor": next})
	return nil
}

type topicView struct {
	Key         string `json:"key"`
	Subscribers int64  `json:"subscribers"`
	CreatedAt   string `json:"created_at"`
}

func listTopics(svc Audiences, w http.ResponseWriter, r *http.Request) error {
	topics, err := svc.Topics(r.Context())
	if err != nil {
		return err
	}
	items := make([]topicView, len(topics))
	for i, t := range topics {
		items[i] = topicView{t.Key, t.Subscribers, timestamp(t.CreatedAt)}
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
	return nil
}
