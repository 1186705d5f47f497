package envoyrls_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/envoyrls"
	"github.com/sluicehq/sluice/internal/store"
)

const keysYAML = `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
`

// openKeys opens a migrated SQLite key store in a temporary directory.
func openKeys(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), store.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// newKey stores a key with scopes and returns its secret and id.
func newKey(t testing.TB, db *store.DB, scopes ...auth.Scope) (secret, id string) {
	t.Helper()
	secret, k, err := auth.NewKey("envoy", scopes, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateAPIKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return secret, k.ID
}

// callWith calls ShouldRateLimit with metadata (name, value pairs) and
// returns the gRPC code.
func (b *bundle) callWith(t *testing.T, md ...string) codes.Code {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), md...)
	resp, err := b.client.ShouldRateLimit(ctx, req("api", desc("user", "u1")))
	if err == nil && resp.OverallCode != rlspb.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit = %v, want OK", resp)
	}
	return status.Code(err)
}

func TestRequireKey(t *testing.T) {
	t.Parallel()
	db := openKeys(t)
	b := setup(t, map[string]string{"api.yaml": keysYAML}, envoyrls.Options{Keys: db})
	check, _ := newKey(t, db, auth.ScopeRatelimitCheck)
	admin, _ := newKey(t, db, auth.ScopeAdmin)
	notify, _ := newKey(t, db, auth.ScopeNotifySend)
	revoked, revokedID := newKey(t, db, auth.ScopeRatelimitCheck)
	if err := db.RevokeAPIKey(t.Context(), revokedID); err != nil {
		t.Fatal(err)
	}
	unknown := "sk_" + strings.Repeat("A", 43)
	for _, tt := range []struct {
		name string
		md   []string
		want codes.Code
	}{
		{"bearer with ratelimit:check", []string{"authorization", "Bearer " + check}, codes.OK},
		{"bearer, scheme in lower case", []string{"authorization", "bearer " + check}, codes.OK},
		{"x-api-key", []string{"x-api-key", check}, codes.OK},
		{"admin", []string{"authorization", "Bearer " + admin}, codes.OK},
		{"no key", nil, codes.Unauthenticated},
		{"another scheme", []string{"authorization", "Basic " + check}, codes.Unauthenticated},
		{"malformed", []string{"x-api-key", "hello"}, codes.Unauthenticated},
		{"unknown", []string{"x-api-key", unknown}, codes.Unauthenticated},
		{"revoked", []string{"authorization", "Bearer " + revoked}, codes.Unauthenticated},
		{"lacks the scope", []string{"authorization", "Bearer " + notify}, codes.PermissionDenied},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := b.callWith(t, tt.md...); got != tt.want {
				t.Errorf("ShouldRateLimit with %q = %v, want %v", tt.md, got, tt.want)
			}
		})
	}
	if got := b.metric(t, "sluice_envoy_auth_refused_total", "code", "PermissionDenied"); got != 1 {
		t.Errorf("sluice_envoy_auth_refused_total{code=PermissionDenied} = %v, want 1", got)
	}
	if !strings.Contains(b.logs.String(), "envoy rate limit call refused") {
		t.Errorf("no refusal logged:\n%s", b.logs.String())
	}
	for _, secret := range []string{check, notify, revoked} {
		if strings.Contains(b.logs.String(), secret) {
			t.Errorf("a key's secret was logged:\n%s", b.logs.String())
		}
	}
}

// TestRequireKeyCache: a revoked key is refused once its cached answer is
// 3 seconds old; while the store fails, a key checked in the last 15
// minutes is still served, then the call answers UNAVAILABLE.
func TestRequireKeyCache(t *testing.T) {
	t.Parallel()
	db := openKeys(t)
	b := setup(t, map[string]string{"api.yaml": keysYAML}, envoyrls.Options{Keys: db})
	secret, id := newKey(t, db, auth.ScopeRatelimitCheck)
	bearer := []string{"authorization", "Bearer " + secret}
	if got := b.callWith(t, bearer...); got != codes.OK {
		t.Fatalf("first call = %v, want OK", got)
	}
	if err := db.RevokeAPIKey(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if got := b.callWith(t, bearer...); got != codes.OK {
		t.Errorf("call within the cache TTL after a revocation = %v, want OK (cached)", got)
	}
	b.clock.Advance(3 * time.Second)
	if got := b.callWith(t, bearer...); got != codes.Unauthenticated {
		t.Errorf("call 3s after a revocation = %v, want Unauthenticated", got)
	}

	secret, _ = newKey(t, db, auth.ScopeRatelimitCheck)
	bearer = []string{"x-api-key", secret}
	if got := b.callWith(t, bearer...); got != codes.OK {
		t.Fatalf("new key = %v, want OK", got)
	}
	db.Close() // the store fails from now on
	b.clock.Advance(10 * time.Minute)
	if got := b.callWith(t, bearer...); got != codes.OK {
		t.Errorf("store down, key checked 10 minutes ago = %v, want OK (stale answer)", got)
	}
	b.clock.Advance(6 * time.Minute)
	if got := b.callWith(t, bearer...); got != codes.Unavailable {
		t.Errorf("store down, key checked 16 minutes ago = %v, want Unavailable", got)
	}
}
