package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
)

// TestReadyzDetailsNeedAdmin: /readyz is public, but engine error text
// (addresses, driver messages) and check details go only to an admin key,
// an admin's dashboard session or a keyless local client; everyone else
// gets the same status code, the engine names and their states.
func TestReadyzDetailsNeedAdmin(t *testing.T) {
	t.Parallel()
	const secretText = "dial tcp 10.9.8.7:6379: connect: connection refused"
	const detailText = "breaker-state-xyz"
	newBundle := func(t *testing.T) *bundle {
		b := setup(t)
		b.srv.opts.Checks = append(b.srv.opts.Checks,
			Check{Name: "redis", Ping: func(context.Context) error { return errors.New(secretText) }},
			Check{Name: "providers", Ping: func(context.Context) error { return nil }, Detail: func() any { return detailText }})
		return b
	}
	keyless := newBundle(t)
	b := newBundle(t)
	admin := b.addKey(t, auth.ScopeAdmin)
	reader := b.addKey(t, auth.ScopeNotifyRead, auth.ScopeRatelimitCheck)
	adminID := keyID(t, b, admin)
	value, _ := b.srv.auth.signer.newSession(adminID, time.Now().Add(time.Hour))
	cookie := &http.Cookie{Name: sessionCookie, Value: value}

	tests := []struct {
		name    string
		b       *bundle
		call    call
		details bool
	}{
		{"no key", b, call{method: "GET", path: "/readyz"}, false},
		{"wrong key", b, call{method: "GET", path: "/readyz", key: "sk_nope"}, false},
		{"key without admin", b, call{method: "GET", path: "/readyz", key: reader}, false},
		{"remote without key", b, call{method: "GET", path: "/readyz", remote: "203.0.113.9:1"}, false},
		{"admin key", b, call{method: "GET", path: "/readyz", key: admin}, true},
		{"admin session", b, call{method: "GET", path: "/readyz", header: http.Header{"Cookie": {cookie.String()}}}, true},
		{"keyless local", keyless, call{method: "GET", path: "/readyz"}, true},
		{"keyless, foreign Host", keyless, call{method: "GET", path: "/readyz", host: "rebind.evil.example"}, false},
		{"keyless, remote", keyless, call{method: "GET", path: "/readyz", remote: "203.0.113.9:1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := tt.b.do(tt.call)
			if resp.StatusCode != 503 {
				t.Fatalf("status = %d, want 503 (one engine fails)", resp.StatusCode)
			}
			body := readAll(t, resp)
			for _, name := range []string{`"redis"`, `"database"`, `"providers"`, "redis: "} {
				if !strings.Contains(body, name) {
					t.Errorf("body lacks %s: %s", name, body)
				}
			}
			for _, secret := range []string{secretText, detailText} {
				if got := strings.Contains(body, secret); got != tt.details {
					t.Errorf("body shows %q = %v, want %v: %s", secret, got, tt.details, body)
				}
			}
		})
	}
}

func keyID(t *testing.T, b *bundle, secret string) string {
	t.Helper()
	k, err := b.db.APIKeyByHash(context.Background(), auth.HashSecret(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k.ID
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
