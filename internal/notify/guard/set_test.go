package guard_test

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/guard"
)

// hosts is a webhook-like provider: a host in down refuses every call
// temporarily; the others accept.
type hosts struct {
	mu    sync.Mutex
	down  map[string]bool
	calls map[string]int
}

func (p *hosts) Name() string       { return "webhook" }
func (p *hosts) NeedsContact() bool { return true }
func (p *hosts) Send(_ context.Context, m notify.Message) (notify.Receipt, error) {
	u, _ := url.Parse(m.To)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[u.Host]++
	if p.down[u.Host] {
		return notify.Receipt{}, notify.Temporary(errors.New("webhook 503"), 0)
	}
	return notify.Receipt{}, nil
}

func hostKey(m notify.Message) string {
	u, err := url.Parse(m.To)
	if err != nil {
		return ""
	}
	return u.Host
}

// TestGuardSetTripsOnlyTheFailingHost: a receiver failing every call
// opens its own breaker; another receiver's deliveries still go out, and
// the set keeps at most Max guards.
func TestGuardSetTripsOnlyTheFailingHost(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	p := &hosts{down: map[string]bool{"slow.example:443": true}, calls: map[string]int{}}
	gs := &guard.Set{Provider: p, Key: hostKey, Max: 3,
		New: func(string) (*guard.Breaker, *guard.Pacer) {
			return guard.NewBreaker(guard.BreakerOptions{Failures: 3, OpenFor: time.Minute, Now: func() time.Time { return now }}), nil
		}}
	send := func(to string) error {
		_, err := gs.Send(t.Context(), notify.Message{Channel: notify.Webhook, To: to})
		return err
	}
	for range 10 {
		_ = send("https://slow.example:443/hook")
		if err := send("https://fine.example/hook"); err != nil {
			t.Fatalf("send to the healthy host = %v", err)
		}
	}
	if got := gs.BreakerState("slow.example:443"); got != guard.BreakerOpen {
		t.Errorf("failing host's breaker = %v, want open", got)
	}
	if got := gs.BreakerState("fine.example"); got != guard.BreakerClosed {
		t.Errorf("healthy host's breaker = %v, want closed", got)
	}
	if p.calls["slow.example:443"] != 3 || p.calls["fine.example"] != 10 {
		t.Errorf("calls = %v, want 3 to the failing host (then its breaker refuses) and 10 to the other", p.calls)
	}
	if err := send("https://slow.example:443/hook"); notify.ErrorClass(err) != notify.ClassUnavailable {
		t.Errorf("send to the tripped host = %v, want unavailable (no call)", err)
	}
	for _, h := range []string{"a.example", "b.example", "c.example"} {
		_ = send("https://" + h + "/")
	}
	if gs.Len() != 3 {
		t.Errorf("guards kept = %d, want Max (3)", gs.Len())
	}
}
