package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/audience"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/notify"
)

// setupAudiences serves the topic and broadcast routes over the bundle's
// SQLite store, with a notify.Service whose queue drops the jobs; send
// runs the due broadcasts, as a node's sender would.
func setupAudiences(t *testing.T, caps audience.Options) (*bundle, func()) {
	t.Helper()
	b := setup(t)
	log := slog.New(slog.DiscardHandler)
	ns := notify.NewService(notify.Options{Store: b.db, Queue: discardQueue{}, Logger: log})
	if _, err := ns.PutTemplate(t.Context(), notify.Template{Type: "sale", Category: notify.Marketing,
		Channels: map[string]map[string]notify.Content{"default": {"en": {Subject: "Sale", Body: "Half off"}}}}); err != nil {
		t.Fatal(err)
	}
	caps.Store, caps.Notifier, caps.Logger = b.db, ns, log
	svc := audience.New(caps)
	b.srv = New(Options{Logger: log, Keys: b.db, Notify: ns, Audiences: svc})
	return b, func() {
		if _, err := svc.RunDue(context.Background()); err != nil {
			t.Fatalf("RunDue: %v", err)
		}
	}
}

type broadcastJSON struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Targeted int    `json:"targeted"`
	Accepted int    `json:"accepted"`
	Skipped  int    `json:"skipped"`
	Groups   []struct {
		Timezone string `json:"timezone"`
		Done     bool   `json:"done"`
	} `json:"groups"`
}

func TestTopicsAndBroadcasts(t *testing.T) {
	t.Parallel()
	b, send := setupAudiences(t, audience.Options{})
	w, r := b.addKey(t, auth.ScopeNotifySend), b.addKey(t, auth.ScopeNotifyRead)
	ids := make([]string, 250)
	for i := range ids {
		ids[i] = fmt.Sprintf(`"u%03d"`, i)
	}
	var added struct{ Added int }
	b.call(t, w, "POST", "/v1/topics/deals/subscribers", `{"user_ids":[`+strings.Join(ids, ",")+`]}`, http.StatusOK, &added)
	b.call(t, w, "POST", "/v1/topics/deals/subscribers", `{"user_ids":["u000"]}`, http.StatusOK, &added)
	if added.Added != 0 {
		t.Errorf("subscribing again added %d, want 0", added.Added)
	}
	b.call(t, w, "DELETE", "/v1/topics/deals/subscribers/u001", "", http.StatusNoContent, nil)
	b.call(t, w, "DELETE", "/v1/topics/deals/subscribers/u001", "", http.StatusNoContent, nil)
	var topics struct {
		Items []struct {
			Key         string
			Subscribers int
		}
	}
	b.call(t, r, "GET", "/v1/topics", "", http.StatusOK, &topics)
	if len(topics.Items) != 1 || topics.Items[0].Subscribers != 249 {
		t.Fatalf("topics = %+v, want deals with 249", topics.Items)
	}
	var all []string
	for cursor := ""; ; {
		var page struct {
			Items      []string
			NextCursor string `json:"next_cursor"`
		}
		b.call(t, r, "GET", "/v1/topics/deals/subscribers?limit=100&cursor="+url.QueryEscape(cursor), "", http.StatusOK, &page)
		all = append(all, page.Items...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(all) != 249 || all[0] != "u000" || all[1] != "u002" {
		t.Fatalf("paged %d subscribers starting %v, want 249 from u000, u002", len(all), all[:2])
	}
	b.call(t, r, "POST", "/v1/topics/deals/subscribers", `{"user_ids":["x"]}`, http.StatusForbidden, nil)
	b.call(t, w, "POST", "/v1/topics/deals/subscribers", `{"user_ids":[]}`, http.StatusBadRequest, nil)

	body := `{"request_id":"flash-1","type":"sale","to":{"topic":"deals"},"data":{"pct":50}}`
	var acc struct {
		BroadcastID string `json:"broadcast_id"`
	}
	b.call(t, w, "POST", "/v1/broadcasts", body, http.StatusAccepted, &acc)
	var again struct {
		BroadcastID string `json:"broadcast_id"`
	}
	b.call(t, w, "POST", "/v1/broadcasts", body, http.StatusOK, &again)
	if again.BroadcastID != acc.BroadcastID {
		t.Errorf("repeated request answered %s, want %s", again.BroadcastID, acc.BroadcastID)
	}
	b.call(t, w, "POST", "/v1/broadcasts", strings.Replace(body, "50", "60", 1), http.StatusConflict, nil)
	b.call(t, w, "POST", "/v1/broadcasts", `{"request_id":"s","type":"sale","to":{"segment":"vip"}}`, http.StatusUnprocessableEntity, nil)
	b.call(t, w, "POST", "/v1/broadcasts", `{"request_id":"n","type":"nope","to":{"topic":"deals"}}`, http.StatusUnprocessableEntity, nil)
	b.call(t, w, "POST", "/v1/broadcasts", `{"request_id":"t","type":"sale","to":{"topic":"deals"},"send_at":"tomorrow"}`, http.StatusBadRequest, nil)
	send()
	var got broadcastJSON
	b.call(t, r, "GET", "/v1/broadcasts/"+acc.BroadcastID, "", http.StatusOK, &got)
	if got.Status != "done" || got.Targeted != 249 || got.Accepted != 249 {
		t.Fatalf("broadcast = %+v, want done with 249 accepted", got)
	}
	n, err := b.db.NotificationByRequestID(t.Context(), audience.RequestID(acc.BroadcastID, "u002"))
	if err != nil || n.UserID != "u002" || n.Type != "sale" {
		t.Fatalf("u002's notification = %+v, %v", n, err)
	}

	// A local-time broadcast in the future, then canceled.
	later := time.Now().AddDate(0, 0, 3).Format("2006-01-02")
	b.call(t, w, "POST", "/v1/broadcasts", `{"request_id":"local-1","type":"sale","to":{"topic":"deals"},"send_at":{"local":"09:00","date":"`+later+`"}}`, http.StatusAccepted, &acc)
	b.call(t, w, "DELETE", "/v1/broadcasts/"+acc.BroadcastID, "", http.StatusOK, &got)
	if got.Status != "canceled" {
		t.Errorf("canceled broadcast = %+v", got)
	}
	var list struct {
		Items []broadcastJSON
	}
	b.call(t, r, "GET", "/v1/broadcasts?limit=10", "", http.StatusOK, &list)
	if len(list.Items) != 2 || list.Items[0].ID != acc.BroadcastID {
		t.Errorf("broadcasts = %+v, want the canceled one first of 2", list.Items)
	}
	b.call(t, r, "GET", "/v1/broadcasts/bc_none", "", http.StatusNotFound, nil)
	b.call(t, r, "DELETE", "/v1/broadcasts/"+acc.BroadcastID, "", http.StatusForbidden, nil)
}

func TestTopicCapsAnswer429(t *testing.T) {
	t.Parallel()
	b, _ := setupAudiences(t, audience.Options{MaxTopics: 1, MaxSubscriptions: 3})
	w := b.addKey(t, auth.ScopeNotifySend)
	b.call(t, w, "POST", "/v1/topics/a/subscribers", `{"user_ids":["u1","u2"]}`, http.StatusOK, nil)
	for _, c := range []struct{ path, body, setting string }{
		{"/v1/topics/b/subscribers", `{"user_ids":["u1"]}`, "notify.audiences.max_topics"},
		{"/v1/topics/a/subscribers", `{"user_ids":["u3","u4"]}`, "notify.audiences.max_subscriptions"},
	} {
		resp := b.do(call{method: "POST", path: c.path, body: c.body, key: w})
		p := decodeProblem(t, resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(p.Detail, c.setting) {
			t.Errorf("POST %s = %d %q, want 429 naming %s", c.path, resp.StatusCode, p.Detail, c.setting)
		}
	}
}
