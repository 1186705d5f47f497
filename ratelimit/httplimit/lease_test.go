package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

// A concurrency policy's slot is held while the request is served and
// freed when the response ends, not one Period later.
func TestMiddlewareReleasesConcurrencyLeases(t *testing.T) {
	t.Parallel()
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
	inflight := &ratelimit.Policy{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: 1, Period: time.Hour}
	var inner func() int
	m := &httplimit.Middleware{
		Store:  store,
		Limits: func(*http.Request) []httplimit.Limit { return []httplimit.Limit{{Policy: inflight, Key: "k"}} },
	}
	serve := func() int {
		rec := httptest.NewRecorder()
		m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if inner != nil {
				f := inner
				inner = nil
				w.WriteHeader(f()) // a request made while this one is in flight
				return
			}
			w.WriteHeader(204)
		})).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		return rec.Code
	}
	nested := 0
	inner = func() int { nested = serve(); return 200 }
	if got := serve(); got != 200 {
		t.Fatalf("outer request = %d", got)
	}
	if nested != 429 {
		t.Errorf("request while the slot is held = %d, want 429", nested)
	}
	if got := serve(); got != 204 {
		t.Errorf("request after the first ended = %d, want 204 (lease released)", got)
	}
}
