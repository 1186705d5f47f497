package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/auth"
)

// TestKeylessRefusesForeignHosts is the DNS rebinding guard: with no key
// configured, a loopback peer is served only when its Host is a loopback
// name or address, or listed in AllowedHosts; a page on a rebinding
// domain (Host: evil.example, resolved to 127.0.0.1) is refused.
func TestKeylessRefusesForeignHosts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.opts.AllowedHosts = []string{"sluice.internal", "Other.Example"}
	tests := []struct {
		host string
		want int
	}{
		{"localhost", 200},
		{"localhost:8080", 200},
		{"LOCALHOST.", 200},
		{"127.0.0.1", 200},
		{"127.0.0.1:8080", 200},
		{"127.9.8.7:1", 200},
		{"[::1]:8080", 200},
		{"[::1]", 200},
		{"[::ffff:127.0.0.1]:8080", 200},
		{"sluice.internal:8080", 200},
		{"other.example", 200},
		{"evil.example", 403},
		{"evil.example:8080", 403},
		{"localhost.evil.example", 403},
		{"127.0.0.1.evil.example", 403},
		{"10.0.0.1:8080", 403},
		{"sluice.internal.evil.example", 403},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			for _, c := range []call{
				{method: "GET", path: "/v1/keys", host: tt.host},
				{method: "GET", path: "/v1/outbox", host: tt.host},
				// Invalid, so that no key is made: served means 422.
				{method: "POST", path: "/v1/keys", body: `{"name":"","scopes":["admin"]}`, host: tt.host},
			} {
				resp := b.do(c)
				got := resp.StatusCode
				if tt.want == 200 && (got == 401 || got == 403) {
					t.Errorf("%s %s with Host %q = %d, want it served", c.method, c.path, tt.host, got)
				}
				if tt.want == 403 {
					if got != 403 {
						t.Fatalf("%s %s with Host %q = %d, want 403", c.method, c.path, tt.host, got)
					}
					decodeProblem(t, resp)
				}
			}
		})
	}
}

func TestHostAllowedRefusesEmptyHost(t *testing.T) {
	t.Parallel()
	if hostAllowed(&http.Request{Host: ""}, []string{""}) {
		t.Error("hostAllowed(Host \"\") = true, want false")
	}
}

// TestKeylessSessionNeedsLoopbackHost: the dashboard's keyless sign-in
// (GET /v1/session says keyless) follows the same rule.
func TestKeylessSessionNeedsLoopbackHost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for host, want := range map[string]bool{"localhost:8080": true, "rebind.evil.example": false} {
		var s sessionJSON
		if err := json.NewDecoder(b.do(call{method: "GET", path: "/v1/session", host: host}).Body).Decode(&s); err != nil {
			t.Fatal(err)
		}
		if s.Keyless != want {
			t.Errorf("GET /v1/session with Host %q: keyless = %v, want %v", host, s.Keyless, want)
		}
	}
}

// TestHostIgnoredWithKeys: once a key exists the caller is whoever holds
// it, whatever name it used.
func TestHostIgnoredWithKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.addKey(t, auth.ScopeAdmin)
	if resp := b.do(call{method: "GET", path: "/v1/keys", host: "sluice.example.com", key: admin}); resp.StatusCode != 200 {
		t.Errorf("admin key with a public Host = %d, want 200", resp.StatusCode)
	}
}
