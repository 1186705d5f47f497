package envoyrls_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/envoyrls"
)

// blocks is a Blocked func over a table of (domain, key, value) blocks;
// domain "" blocks the entry in every domain.
type blocks struct {
	mu    sync.Mutex
	until map[[3]string]time.Time
}

func (b *blocks) set(domain, key, value string, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.until == nil {
		b.until = map[[3]string]time.Time{}
	}
	b.until[[3]string{domain, key, value}] = until
}

func (b *blocks) blocked(domain, key, value string, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var until time.Time
	for _, d := range []string{domain, ""} {
		if u, ok := b.until[[3]string{d, key, value}]; ok && u.After(now) && u.After(until) {
			until = u
		}
	}
	return until, !until.IsZero()
}

// TestBlockedEntries: a descriptor carrying a blocked entry is OVER_LIMIT
// until the block ends, in configured domains and others alike, and its
// request charges nothing.
func TestBlockedEntries(t *testing.T) {
	t.Parallel()
	var bl blocks
	b := setup(t, map[string]string{"api.yaml": apiYAML}, envoyrls.Options{Blocked: bl.blocked})
	now := b.clock.Now()
	bl.set("api", "ip", "203.0.113.9", now.Add(90*time.Second))
	bl.set("", "remote_address", "198.51.100.7", now.Add(time.Hour))

	steps := []struct {
		name string
		req  string
		got  func() string
		want string
	}{
		{"blocked in its domain", "api ip=203.0.113.9", func() string {
			return summary(b.call(t, req("api", desc("ip", "203.0.113.9"))))
		}, "OVER_LIMIT [OVER_LIMIT 5/MINUTE r=0 t=90]"},
		{"the other descriptor is reported, not charged", "api user=ann, ip=203.0.113.9", func() string {
			return summary(b.call(t, req("api", desc("user", "ann"), desc("ip", "203.0.113.9"))))
		}, "OVER_LIMIT [OK per_user 3/MINUTE r=3 t=0, OVER_LIMIT 5/MINUTE r=0 t=90]"},
		{"one entry of several", "api user=ann+ip=203.0.113.9 (no rule)", func() string {
			return summary(b.call(t, req("api", desc("user", "ann", "ip", "203.0.113.9"))))
		}, "OVER_LIMIT [OVER_LIMIT]"},
		{"other value", "api ip=203.0.113.10", func() string {
			return summary(b.call(t, req("api", desc("ip", "203.0.113.10"))))
		}, "OK [OK 5/MINUTE r=4 t=60]"},
		{"blocked in another domain only", "web ip=203.0.113.9", func() string {
			return summary(b.call(t, req("web", desc("ip", "203.0.113.9"))))
		}, "OK [OK]"},
		{"every-domain block, unconfigured domain", "web remote_address=198.51.100.7", func() string {
			return summary(b.call(t, req("web", desc("remote_address", "198.51.100.7"))))
		}, "OVER_LIMIT [OVER_LIMIT]"},
		{"every-domain block, configured domain", "api remote_address=198.51.100.7", func() string {
			return summary(b.call(t, req("api", desc("remote_address", "198.51.100.7"), desc("user", "ann"))))
		}, "OVER_LIMIT [OVER_LIMIT, OK per_user 3/MINUTE r=3 t=0]"},
	}
	for _, s := range steps {
		if got := s.got(); got != s.want {
			t.Errorf("%s: %s = %s, want %s", s.name, s.req, got, s.want)
		}
	}

	resp := b.call(t, req("web", desc("remote_address", "198.51.100.7")))
	if h := resp.ResponseHeadersToAdd; len(h) != 1 || h[0].Key != "Retry-After" || h[0].Value != "3600" {
		t.Errorf("headers of a blocked request without a limit = %v, want Retry-After: 3600", h)
	}
	resp = b.call(t, req("api", desc("ip", "203.0.113.9")))
	if got := headerOf(resp.ResponseHeadersToAdd, "Retry-After"); got != "90" {
		t.Errorf("Retry-After of a blocked request = %q, want 90", got)
	}
	if got := b.metric(t, "sluice_envoy_blocked_total", "domain", "api"); got != 5 {
		t.Errorf("sluice_envoy_blocked_total{domain=api} = %v, want 5", got)
	}
	if got := b.metric(t, "sluice_envoy_blocked_total", "domain", ""); got != 2 {
		t.Errorf(`sluice_envoy_blocked_total{domain=""} = %v, want 2`, got)
	}
	if got := b.metric(t, "sluice_envoy_over_limit_total", "domain", "api"); got != 0 {
		t.Errorf("sluice_envoy_over_limit_total{domain=api} = %v, want 0 (blocks are counted apart)", got)
	}

	b.clock.Advance(90 * time.Second) // the block ends; the window too
	if got := summary(b.call(t, req("api", desc("ip", "203.0.113.9")))); got != "OK [OK 5/MINUTE r=4 t=30]" {
		t.Errorf("after the block = %s, want OK with 4 of 5 left (nothing charged while blocked)", got)
	}
}

// TestBlockCheckAllocatesNothing: asking Blocked for every entry adds no
// allocation to a call that nothing blocks.
func TestBlockCheckAllocatesNothing(t *testing.T) {
	var bl blocks
	bl.set("elsewhere", "ip", "192.0.2.1", time.Unix(1<<40, 0))
	files := map[string]string{"api.yaml": apiYAML}
	without := setup(t, files, envoyrls.Options{})
	with := setup(t, files, envoyrls.Options{Blocked: func(domain, key, value string, now time.Time) (time.Time, bool) {
		return time.Time{}, false
	}})
	r := req("api", desc("user", "ann", "path", "/login"), desc("ip", "203.0.113.9"))
	ctx := context.Background()
	allocs := func(b *bundle) float64 {
		return testing.AllocsPerRun(100, func() { _, _ = b.server.ShouldRateLimit(ctx, r) })
	}
	if a, b := allocs(without), allocs(with); b > a {
		t.Errorf("ShouldRateLimit allocates %v times with Blocked, %v without; want no more", b, a)
	}
}

func headerOf[H interface {
	GetKey() string
	GetValue() string
}](hs []H, key string) string {
	for _, h := range hs {
		if h.GetKey() == key {
			return h.GetValue()
		}
	}
	return ""
}
