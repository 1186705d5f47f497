package gateway_test

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/gateway"
	"github.com/sluicehq/sluice/internal/store"
)

// storedKey creates an API key in the gateway's key store (o.Keys) and
// returns its secret; revoked makes it a revoked one.
func storedKey(t *testing.T, o *gateway.Options, revoked bool) string {
	t.Helper()
	db := o.Keys.(*store.DB)
	secret, k, err := auth.NewKey("gw", []auth.Scope{auth.ScopeRatelimitCheck}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateAPIKey(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if revoked {
		if err := db.RevokeAPIKey(t.Context(), k.ID); err != nil {
			t.Fatal(err)
		}
	}
	return secret
}

// TestMadeUpKeysAreLimitedByIP: a client sending a fresh random key on
// every request is limited as its IP, not given a tier per key.
func TestMadeUpKeysAreLimitedByIP(t *testing.T) {
	t.Parallel()
	cfg := gateway.Config{DefaultTier: "bronze", AnonymousPolicy: "anon"}
	gs, _, svc := setup(t, cfg, map[string]int64{"bronze": 1000, "anon": 5})
	allowed := 0
	for i := range 200 {
		key := rand.Text()
		if i%2 == 0 {
			key = "sk_" + strings.Repeat("A", 37) + rand.Text()[:6] // shaped like a Sluice key, not stored
		}
		resp := do(t, gs, req{path: "/a", apiKey: key})
		resp.Body.Close()
		if resp.StatusCode == 200 {
			allowed++
		}
	}
	if allowed != 5 {
		t.Errorf("200 requests with 200 made-up keys from one IP: %d allowed, want the IP limit 5", allowed)
	}
	if st, _ := svc.Peek(t.Context(), "anon", "ip:127.0.0.1"); st.Remaining != 0 {
		t.Errorf("ip:127.0.0.1 has %d left on anon, want 0", st.Remaining)
	}
}

// TestKnownKeysSelectTiers: keys named in tiers get their tier, stored
// active keys the default tier, revoked ones count as unknown.
func TestKnownKeysSelectTiers(t *testing.T) {
	t.Parallel()
	var stored, revoked string
	cfg := gateway.Config{Tiers: map[string]string{"gold-key": "gold"}, DefaultTier: "bronze", AnonymousPolicy: "anon"}
	gs, _, _ := setupOpts(t, cfg, map[string]int64{"gold": 50, "bronze": 20, "anon": 3}, func(o *gateway.Options) {
		stored, revoked = storedKey(t, o, false), storedKey(t, o, true)
	})
	tests := []struct {
		name, key, quota string
	}{
		{"a key named in tiers", "gold-key", "50"},
		{"a stored key", stored, "20"},
		{"a revoked key", revoked, "3"},
		{"an unknown key", "made-up", "3"},
		{"no key", "", "3"},
	}
	for _, tt := range tests {
		resp := do(t, gs, req{path: "/a", apiKey: tt.key})
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("RateLimit-Policy"), ";q="+tt.quota+";") {
			t.Errorf("%s: status %d, RateLimit-Policy %q; want 200 with q=%s", tt.name, resp.StatusCode, resp.Header.Get("RateLimit-Policy"), tt.quota)
		}
	}
}

// TestRequireKey: a route with require_key refuses requests without a
// known key with 401 problem+json, and still counts them against the IP.
func TestRequireKey(t *testing.T) {
	t.Parallel()
	var stored string
	cfg := gateway.Config{DefaultTier: "bronze", AnonymousPolicy: "anon",
		Routes: []gateway.Route{{Path: "/private", RequireKey: true}}}
	gs, up, svc := setupOpts(t, cfg, map[string]int64{"bronze": 20, "anon": 10}, func(o *gateway.Options) {
		stored = storedKey(t, o, false)
	})
	for _, key := range []string{"", "made-up"} {
		resp := do(t, gs, req{path: "/private/x", apiKey: key})
		var p problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" || p.Status != 401 {
			t.Errorf("key %q on a require_key route: %d %s %+v, want 401 problem+json", key, resp.StatusCode, resp.Header.Get("Content-Type"), p)
		}
	}
	if n := len(up.bodies); n != 0 {
		t.Errorf("%d refused requests reached the upstream", n)
	}
	if st, _ := svc.Peek(t.Context(), "anon", "ip:127.0.0.1"); st.Remaining != 8 {
		t.Errorf("refused requests: ip:127.0.0.1 has %d left, want 8 (both counted)", st.Remaining)
	}
	if resp := do(t, gs, req{path: "/private/x", apiKey: stored}); resp.StatusCode != 200 {
		t.Errorf("a stored key on a require_key route: %d, want 200", resp.StatusCode)
	}
	if resp := do(t, gs, req{path: "/public"}); resp.StatusCode != 200 {
		t.Errorf("no key on another route: %d, want 200", resp.StatusCode)
	}
}

// TestEmptyPoliciesChargeNoTier: a route with policies: [] (a login route)
// is limited only by what it lists, never by the client's tier.
func TestEmptyPoliciesChargeNoTier(t *testing.T) {
	t.Parallel()
	// What cmd/sluice makes of YAML's policies: [] (TestGatewayConfigFromYAML).
	cfg := gateway.Config{Upstream: "http://127.0.0.1:1", AnonymousPolicy: "free", Routes: []gateway.Route{
		{Path: "/login", Policies: []string{}, IPPolicy: "login_ip"},
		{Path: "/other"},
	}}
	gs, _, _ := setup(t, cfg, map[string]int64{"free": 2, "login_ip": 6})
	allowed := 0
	for range 8 {
		if resp := do(t, gs, req{method: "POST", path: "/login"}); resp.StatusCode == 200 {
			allowed++
		}
	}
	if allowed != 6 {
		t.Errorf("8 logins from one IP: %d allowed, want 6 (login_ip's limit, not the free tier's 2)", allowed)
	}
	// An absent list means the tier.
	allowed = 0
	for range 4 {
		if resp := do(t, gs, req{path: "/other"}); resp.StatusCode == 200 {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("4 requests to a route without policies: %d allowed, want the tier's 2", allowed)
	}
}
