package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/shorten"
)

// TestWriteErrorClientGone: a request cancelled because its client went
// away is recorded as 499 and not logged as a server error; the same error
// while the client is still there is a 500 with an error log line.
func TestWriteErrorClientGone(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest(http.MethodPost, "/v1/notifications", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	writeError(w, r, log, fmt.Errorf("create notification: %w", context.Canceled))
	if w.Code != StatusClientClosedRequest || logs.Len() != 0 {
		t.Errorf("client gone: status %d, log %q; want 499 and nothing at info level", w.Code, logs.String())
	}

	r = httptest.NewRequest(http.MethodPost, "/v1/notifications", nil)
	w = httptest.NewRecorder()
	writeError(w, r, log, fmt.Errorf("create notification: %w", context.Canceled))
	if w.Code != http.StatusInternalServerError || !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("client still there: status %d, log %q; want 500 and an error line", w.Code, logs.String())
	}
}

// acceptAll is a NotifyService that accepts every notification; the
// other methods are not called by TestAccessLogLevels.
type acceptAll struct{ NotifyService }

func (acceptAll) Send(context.Context, notify.Request) (notify.Accepted, error) {
	return notify.Accepted{NotificationID: "ntf_1"}, nil
}

// TestAccessLogLevels: an accepted single notification is logged at debug
// (it is frequent, and its record is the notification), a refused one at
// info like any other request.
func TestAccessLogLevels(t *testing.T) {
	var logs bytes.Buffer
	db := setup(t).db // for the API keys: none, so loopback is served
	srv := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Keys: db, Notify: acceptAll{}})
	post := func(body string) int {
		req := httptest.NewRequest(http.MethodPost, "http://localhost/v1/notifications", strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:5555"
		req.Header.Set("Content-Type", "application/json")
		w := record(t, srv, req)
		return w.Code
	}
	if code := post(`{"user_id":"u1","type":"otp","data":{"code":"1"}}`); code != http.StatusAccepted || strings.Contains(logs.String(), "http request") {
		t.Errorf("accepted: status %d, log %q; want 202 and no info line", code, logs.String())
	}
	if code := post(`{"user_id":`); code != http.StatusBadRequest || !strings.Contains(logs.String(), "status=400") {
		t.Errorf("refused: status %d, log %q; want 400 and an info line", code, logs.String())
	}
}

// refuseByUser is a NotifyService whose Send fails as its request's user
// id says; the other methods are not called by TestBatchItemProblems.
type refuseByUser struct{ NotifyService }

func (refuseByUser) PrefetchSettings(context.Context, []string) error { return nil }

func (refuseByUser) Send(_ context.Context, req notify.Request) (notify.Accepted, error) {
	switch req.UserID {
	case "busy":
		return notify.Accepted{}, apperr.New(apperr.Unavailable, "the queue is full")
	case "bug":
		return notify.Accepted{}, errors.New("secret cause")
	case "bad":
		return notify.Accepted{}, fieldErrors(apperr.Unprocessable, "type", "is unknown")
	}
	return notify.Accepted{NotificationID: "ntf_" + req.UserID}, nil
}

// TestBatchItemProblems: a refused batch item carries the problem the same
// request alone would answer (problemOf), its status, type and detail; an
// internal cause is not shown.
func TestBatchItemProblems(t *testing.T) {
	t.Parallel()
	db := setup(t).db
	srv := New(Options{Logger: slog.New(slog.DiscardHandler), Keys: db, Notify: refuseByUser{}})
	body := `{"notifications":[{"user_id":"ok","type":"otp"},{"user_id":"busy","type":"otp"},{"user_id":"bug","type":"otp"},{"user_id":"bad","type":"otp"}]}`
	req := httptest.NewRequest(http.MethodPost, "http://localhost/v1/notifications/batch", strings.NewReader(body))
	req.RemoteAddr = "127.0.0.1:5555"
	req.Header.Set("Content-Type", "application/json")
	w := record(t, srv, req)
	var got struct {
		Results  []batchResult `json:"results"`
		Accepted int           `json:"accepted"`
		Refused  int           `json:"refused"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK || len(got.Results) != 4 {
		t.Fatalf("batch = %d %s (%v); want 200 with 4 results", w.Code, w.Body, err)
	}
	if got.Accepted != 1 || got.Refused != 3 || got.Results[0].NotificationID != "ntf_ok" {
		t.Errorf("batch = %s; want ok accepted, the other three refused", w.Body)
	}
	tests := []struct {
		name   string
		item   int
		status int
		typ    string
		detail string
	}{
		{name: "unavailable", item: 1, status: http.StatusServiceUnavailable, typ: ProblemBase + "unavailable", detail: "the queue is full"},
		{name: "internal", item: 2, status: http.StatusInternalServerError, typ: ProblemBase + "internal-error",
			detail: "internal error; the server log has the details under this request id"},
		{name: "validation", item: 3, status: http.StatusUnprocessableEntity, typ: ProblemBase + "validation-error", detail: "type is unknown"},
	}
	for _, tt := range tests {
		p := got.Results[tt.item].Error
		if got.Results[tt.item].Status != "refused" || p == nil || p.Status != tt.status || p.Type != tt.typ || p.Detail != tt.detail {
			t.Errorf("%s: item = %+v, problem %+v; want refused with %d %s %q", tt.name, got.Results[tt.item], p, tt.status, tt.typ, tt.detail)
		}
	}
	if strings.Contains(w.Body.String(), "secret cause") {
		t.Errorf("batch = %s; the internal cause must not be shown", w.Body)
	}
}

// TestProblemTitlesAreStatusText keeps one title per status: a 404 from a
// handler and a 404 for an unknown route both say "Not Found".
func TestProblemTitlesAreStatusText(t *testing.T) {
	t.Parallel()
	for code, k := range kinds {
		if p := problemOf(apperr.New(code, "x")); p.Title != http.StatusText(k.status) {
			t.Errorf("%v: title %q, want %q", code, p.Title, http.StatusText(k.status))
		}
	}
	b := setup(t)
	admin := b.addKey(t, auth.ScopeAdmin)
	for _, path := range []string{"/no/such/route", "/v1/keys/nope"} {
		method := "GET"
		if path == "/v1/keys/nope" {
			method = "DELETE"
		}
		resp := b.do(call{method: method, path: path, key: admin})
		if p := decodeProblem(t, resp); resp.StatusCode != 404 || p.Title != "Not Found" {
			t.Errorf("%s %s = %d %q, want 404 \"Not Found\"", method, path, resp.StatusCode, p.Title)
		}
	}
}

// storeDown is a NotifyService and Links whose creations fail as the
// store's do once its retries ran out with PostgreSQL down; the other
// methods are not called by TestCreationsAnswer503WithRetryAfter.
type storeDown struct {
	NotifyService
	Links
}

// errStoreDown is what the store returns for a write while PostgreSQL is
// down: Unavailable, transient, its cause for the log only.
var errStoreDown = apperr.Wrap(apperr.Unavailable,
	apperr.MarkTransient(errors.New("create notification: dial tcp 10.0.0.5:5432: connect: connection refused")), "database unavailable")

func (storeDown) Send(context.Context, notify.Request) (notify.Accepted, error) {
	return notify.Accepted{}, errStoreDown
}

func (storeDown) Create(context.Context, shorten.CreateRequest) (shorten.Link, error) {
	return shorten.Link{}, fmt.Errorf("create link: %w", errStoreDown)
}

// TestCreationsAnswer503WithRetryAfter: a notification post or a link
// creation that the store refused as unavailable answers 503 problem+json
// with Retry-After, and shows the client neither address nor cause.
func TestCreationsAnswer503WithRetryAfter(t *testing.T) {
	t.Parallel()
	down := storeDown{}
	srv := New(Options{Logger: slog.New(slog.DiscardHandler), Keys: setup(t).db, Notify: down, Links: down})
	for _, c := range []struct{ path, body string }{
		{"/v1/notifications", `{"user_id":"u1","type":"otp","data":{"code":"1"}}`},
		{"/v1/links", `{"url":"https://example.com/a"}`},
	} {
		req := httptest.NewRequest(http.MethodPost, "http://localhost"+c.path, strings.NewReader(c.body))
		req.RemoteAddr = "127.0.0.1:5555"
		req.Header.Set("Content-Type", "application/json")
		w := record(t, srv, req)
		var p Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("POST %s = %d %s: %v", c.path, w.Code, w.Body, err)
		}
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Content-Type") != "application/problem+json" ||
			w.Header().Get("Retry-After") != "1" || p.Type != ProblemBase+"unavailable" || p.Detail != "database unavailable" {
			t.Errorf("POST %s = %d, Content-Type %q, Retry-After %q, problem %+v; want 503 problem+json, Retry-After 1, type unavailable, detail \"database unavailable\"",
				c.path, w.Code, w.Header().Get("Content-Type"), w.Header().Get("Retry-After"), p)
		}
		if strings.Contains(w.Body.String(), "10.0.0.5") || strings.Contains(w.Body.String(), "refused") {
			t.Errorf("POST %s = %s; the cause must not be shown", c.path, w.Body)
		}
	}
}
