package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/ratelimit"
)

// FuzzMeter feeds arbitrary response bodies, in two writes, through the
// meter that finds a JSON cost: it must never panic, and it passes the
// body through unchanged.
func FuzzMeter(f *testing.F) {
	f.Add("text/event-stream", []byte("data: {\"usage\":{\"total_tokens\":7}}\n\ndata: [DONE]\n\n"), 5)
	f.Add("application/json", []byte(`{"usage":{"total_tokens":7.5}}`), 3)
	f.Add("text/event-stream", []byte("data: {\"usage\":\r\ndata: {\"total_tokens\":1}}\r\n\r\n"), 0)
	f.Fuzz(func(t *testing.T, ct string, body []byte, cut int) {
		rec := httptest.NewRecorder()
		m := &meter{ResponseWriter: rec, field: "usage.total_tokens"}
		m.Header().Set("Content-Type", ct)
		cut = min(max(cut, 0), len(body))
		m.WriteHeader(http.StatusOK)
		_, _ = m.Write(body[:cut])
		_, _ = m.Write(body[cut:])
		if got := rec.Body.String(); got != string(body) {
			t.Fatalf("body passed through as %q, want %q", got, body)
		}
		if v, st := responseCost(&config.CostFromResponse{JSON: m.field}, m); st == costFound && (v < 0 || v > ratelimit.MaxUsageCost) {
			t.Fatalf("cost %d, want none or at least 0", v)
		}
	})
}
