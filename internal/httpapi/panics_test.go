package httpapi

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/panics"
)

// TestPanicReportedOnce checks that a handler's panic is logged once, with
// its stack, counted on the "http" surface, answered 500 problem+json
// when nothing was written yet, and that the server goes on serving.
func TestPanicReportedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var (
		mu     sync.Mutex
		log    bytes.Buffer
		counts = map[string]int{}
	)
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &log}, nil))
	b.srv.log = logger
	b.srv.opts.Panics = &panics.Reporter{Logger: logger, Count: func(s string) { mu.Lock(); counts[s]++; mu.Unlock() }}
	b.srv.Handle("GET /boom", public, func(http.ResponseWriter, *http.Request) error { panic("kaboom") })
	b.srv.Handle("GET /half", public, func(w http.ResponseWriter, _ *http.Request) error {
		w.WriteHeader(http.StatusOK)
		panic("half sent")
	})

	rec := httptest.NewRecorder()
	b.srv.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	if rec.Code != 500 || rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("status = %d %q, want 500 problem+json", rec.Code, rec.Header().Get("Content-Type"))
	}
	if strings.Contains(rec.Body.String(), "kaboom") {
		t.Errorf("answer leaks the panic: %s", rec.Body)
	}
	rec = httptest.NewRecorder()
	b.srv.ServeHTTP(rec, httptest.NewRequest("GET", "/half", nil))
	if rec.Code != 200 || rec.Body.Len() != 0 {
		t.Errorf("half sent: status = %d, body %q; want the 200 already sent and nothing added", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	b.srv.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Errorf("after the panics: /healthz = %d, want 200", rec.Code)
	}

	mu.Lock()
	defer mu.Unlock()
	out := log.String()
	if n := strings.Count(out, "level=ERROR"); n != 2 {
		t.Errorf("%d error records, want one per panic (2):\n%s", n, out)
	}
	if !strings.Contains(out, "panic=kaboom") || !strings.Contains(out, "stack=") || !strings.Contains(out, "route=\"GET /boom\"") {
		t.Errorf("log lacks the panic, its stack or its route:\n%s", out)
	}
	if counts[panics.HTTP] != 2 {
		t.Errorf("counted %v, want http: 2", counts)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
