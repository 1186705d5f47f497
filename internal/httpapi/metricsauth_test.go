package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
)

// TestMetricsAuth: /metrics is public by default; with MetricsAuth it
// needs a valid key of any scope (or a dashboard session), else 401.
func TestMetricsAuth(t *testing.T) {
	t.Parallel()
	open := setup(t)
	open.addKey(t, auth.ScopeAdmin)
	if resp := open.do(call{method: "GET", path: "/metrics", remote: "203.0.113.5:1"}); resp.StatusCode != 200 {
		t.Errorf("default /metrics without a key = %d, want 200", resp.StatusCode)
	}

	b := setup(t)
	b.srv = New(Options{Logger: b.srv.log, Keys: b.db, MetricsAuth: true})
	checker := b.addKey(t, auth.ScopeRatelimitCheck)
	admin := b.addKey(t, auth.ScopeAdmin)
	value, _ := b.srv.auth.signer.newSession(keyID(t, b, admin), time.Now().Add(time.Hour))
	session := http.Header{"Cookie": {(&http.Cookie{Name: sessionCookie, Value: value}).String()}}
	tests := []struct {
		name string
		call call
		want int
	}{
		{"no key", call{method: "GET", path: "/metrics", remote: "203.0.113.5:1"}, 401},
		{"no key, loopback", call{method: "GET", path: "/metrics"}, 401},
		{"wrong key", call{method: "GET", path: "/metrics", key: "sk_nope"}, 401},
		{"any scope", call{method: "GET", path: "/metrics", key: checker}, 200},
		{"admin", call{method: "GET", path: "/metrics", key: admin}, 200},
		{"dashboard session", call{method: "GET", path: "/metrics", header: session}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := b.do(tt.call)
			if resp.StatusCode != tt.want {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want == 401 {
				decodeProblem(t, resp)
			}
		})
	}
}
