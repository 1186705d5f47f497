package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/notify"
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
		req := httptest.NewRequest(http.MethodPost, "/v1/notifications", strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:5555"
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		return w.Code
	}
	if code := post(`{"user_id":"u1","type":"otp","data":{"code":"1"}}`); code != http.StatusAccepted || strings.Contains(logs.String(), "http request") {
		t.Errorf("accepted: status %d, log %q; want 202 and no info line", code, logs.String())
	}
	if code := post(`{"user_id":`); code != http.StatusBadRequest || !strings.Contains(logs.String(), "status=400") {
		t.Errorf("refused: status %d, log %q; want 400 and an info line", code, logs.String())
	}
}
