package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// setupHolds is a server on a real listener with a failed-login policy of
// 5 a minute, on a memory store, with maxHolds unsettled reservations per
// key (0: the default).
func setupHolds(t *testing.T, maxHolds int) (*bundle, *httptest.Server) {
	t.Helper()
	b := setup(t)
	rules, err := limits.NewRules(limits.RulesOptions{Store: b.db})
	if err != nil {
		t.Fatal(err)
	}
	if err := rules.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	svc, err := limits.NewService(limits.Options{Rules: rules, Counters: ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), MaxHolds: maxHolds})
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
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				code, a, err := postCheck(client, ts, `{"policy":"logins","key":"user:ann","charge":"on_settle"}`)
				if err != nil || code != http.StatusOK {
					t.Errorf("check = %d, %v", code, err)
					return
				}
				if a.Allowed {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
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
