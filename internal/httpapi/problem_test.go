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
