package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
)

// setupHolds is a server on a real listener with a failed-login policy of
// 5 a minute, on a memory store whose clock stands still (no window
// rolls during a flood), with maxHolds unsettled reservations per
// key (0: the default).
func setupHolds(t *testing.T, maxHolds int) (*bundle, *httptest.Server) {
	t.Helper()
	b := setup(t)
	rules := loadedRules(t, b)
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
	svc, err := limits.NewService(limits.Options{Rules: rules, Counters: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: clock.Now}),
		Now: clock.Now, MaxHolds: maxHolds})
	if err != nil {
		t.Fatal(err)
	}
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Ratelimit: svc})
	for name, body := range map[string]string{
		"logins": `{"algorithm":"fixed_window","limit":5,"period":"1m"}`,
		"big":    `{"algorithm":"token_bucket","limit":1000000,"period":"1m"}`,
	} {
		if resp := b.do(call{method: "PUT", path: "/v1/ratelimit/policies/" + name, body: body}); resp.StatusCode != 201 {
			t.Fatalf("PUT %s = %d", name, resp.StatusCode)
		}
	}
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	return b, ts
}

// postCheck posts body to ts's check route and decodes the answer.
func postCheck(c *http.Client, ts *httptest.Server, body string) (int, usageAnswer, error) {
	resp, err := c.Post(ts.URL+"/v1/ratelimit/check", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, usageAnswer{}, err
	}
	defer resp.Body.Close()
	var a usageAnswer
	if resp.StatusCode == http.StatusOK {
		err = json.NewDecoder(resp.Body).Decode(&a)
	}
	return resp.StatusCode, a, err
}

// A brute force runs its login attempts in parallel and never lets a
// failure be settled before the others are checked: the unsettled
// on_settle reservations count, so 5 a minute admits 5.
func TestOnSettleFloodAdmitsTheLimit(t *testing.T) {
	t.Parallel()
	_, ts := setupHolds(t, 0)
	client := &http.Client{Timeout: 10 * time.Second}
	const workers, each = 16, 20
	admitted := ratelimittest.Flood(t, workers, each, func() (bool, error) {
		code, a, err := postCheck(client, ts, `{"policy":"logins","key":"user:ann","charge":"on_settle"}`)
		if err != nil || code != http.StatusOK {
			return false, fmt.Errorf("check = %d, %v", code, err)
		}
		return a.Allowed, nil
	})
	if admitted > 5 {
		t.Errorf("%d of %d parallel unsettled login attempts admitted on 5 a minute, want at most 5", admitted, workers*each)
	}
	code, a, err := postCheck(client, ts, `{"policy":"logins","key":"user:ann","charge":"on_settle"}`)
	if err != nil || code != http.StatusOK || a.Allowed || a.Remaining != 0 {
		t.Errorf("check after the flood = %d %+v %v, want refused with 0 remaining", code, a, err)
	}
}

// Past the bound on one key's unsettled reservations a check answers 429
// problem+json and takes nothing; settling one makes room.
func TestTooManyHoldsIs429(t *testing.T) {
	t.Parallel()
	b, ts := setupHolds(t, 3)
	client := &http.Client{Timeout: 10 * time.Second}
	var ids []string
	for i := range 3 {
		code, a, err := postCheck(client, ts, `{"policy":"big","key":"k","reserve":true}`)
		if err != nil || code != 200 || !a.Allowed {
			t.Fatalf("reservation %d = %d %+v %v", i, code, a, err)
		}
		ids = append(ids, a.ReservationID)
	}
	resp, err := client.Post(ts.URL+"/v1/ratelimit/check", "application/json", strings.NewReader(`{"policy":"big","key":"k","reserve":true}`))
	if err != nil {
		t.Fatal(err)
	}
	p := decodeProblem(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(p.Detail, "unsettled reservations") {
		t.Errorf("fourth reservation = %d %+v, want 429 naming unsettled reservations", resp.StatusCode, p)
	}
	if code, _ := b.settleCall(t, ids[0], 0); code != 200 {
		t.Fatalf("settle = %d", code)
	}
	if code, a, err := postCheck(client, ts, `{"policy":"big","key":"k","reserve":true}`); err != nil || code != 200 || !a.Allowed {
		t.Errorf("reservation after a settle = %d %+v %v, want allowed", code, a, err)
	}
}

// spyUsage is a counter store that records the reservation ids Settle is
// asked about.
type spyUsage struct {
	*ratelimit.MemoryStore
	mu  sync.Mutex
	ids []string
}

func (s *spyUsage) Settle(ctx context.Context, id string, cost int64) (ratelimit.Settlement, error) {
	s.mu.Lock()
	s.ids = append(s.ids, id)
	s.mu.Unlock()
	return s.MemoryStore.Settle(ctx, id, cost)
}

// A reservation id names a Redis key: an id of any other shape than the
// server issues answers 404 problem+json and never reaches the store.
func TestSettleMalformedIDOverHTTP(t *testing.T) {
	t.Parallel()
	spy := &spyUsage{MemoryStore: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})}
	clock := ratelimittest.NewClock(ratelimittest.Epoch)
	b := setupUsageOn(t, clock, spy)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	client := &http.Client{Timeout: 10 * time.Second}
	for _, id := range []string{"a}b", "{x}", "x:y", "*", "res:*", "a\nb", "a\r\nGET k", "a|b", "a b", "a~~b", "~a",
		strings.Repeat("a", 10_000)} {
		body, _ := json.Marshal(map[string]any{"reservation_id": id, "cost": 1})
		resp, err := client.Post(ts.URL+"/v1/ratelimit/settle", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		p := decodeProblem(t, resp)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("settle %.40q = %d %+v, want 404", id, resp.StatusCode, p)
		}
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.ids) != 0 {
		t.Errorf("the store was asked to settle %.80q, want no malformed id to reach it", spy.ids)
	}
}
