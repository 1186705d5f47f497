package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
)

func (s suite) apiKeys(t *testing.T) {
	t.Run("RoundTrip", s.apiKeyRoundTrip)
	t.Run("TimesToTheMicrosecond", s.apiKeyTimes)
	t.Run("Conflicts", s.apiKeyConflicts)
	t.Run("NotFound", s.apiKeyNotFound)
	t.Run("ListOrder", s.apiKeyListOrder)
	t.Run("RevokeAndCount", s.apiKeyRevoke)
	t.Run("ConcurrentWriters", s.apiKeyConcurrentWriters)
}

// newKey makes a valid key named name created at created.
func newKey(t *testing.T, name string, created time.Time) auth.Key {
	t.Helper()
	_, k, err := auth.NewKey(name, []auth.Scope{auth.ScopeNotifySend, auth.ScopeNotifyRead}, created, nil)
	if err != nil {
		t.Fatalf("NewKey: %v", err)
	}
	return k
}

func equalKeys(a, b auth.Key) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Prefix == b.Prefix && a.Hash == b.Hash &&
		slices.Equal(a.Scopes, b.Scopes) && a.CreatedAt.Equal(b.CreatedAt) && a.RevokedAt.Equal(b.RevokedAt) &&
		a.CreatedAt.Location() == time.UTC && (b.RevokedAt.IsZero() || a.RevokedAt.Location() == time.UTC)
}

func (s suite) apiKeyRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	want := newKey(t, "ci", time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC))
	if err := db.CreateAPIKey(ctx, want); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	got, err := db.APIKeyByHash(ctx, want.Hash)
	if err != nil {
		t.Fatalf("APIKeyByHash: %v", err)
	}
	if !equalKeys(got, want) || !got.Active() {
		t.Errorf("APIKeyByHash = %+v, want %+v (active, times in UTC)", got, want)
	}

	noScopes := newKey(t, "bare", want.CreatedAt)
	noScopes.Scopes = nil
	if err := db.CreateAPIKey(ctx, noScopes); err != nil {
		t.Fatalf("CreateAPIKey without scopes: %v", err)
	}
	if got, err := db.APIKeyByHash(ctx, noScopes.Hash); err != nil || len(got.Scopes) != 0 {
		t.Errorf("key without scopes read back as %+v, %v; want no scopes", got, err)
	}
}

func (s suite) apiKeyTimes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	tests := []struct {
		name    string
		created time.Time
		revoked time.Time
	}{
		{"nanoseconds are truncated", time.Date(2026, 1, 2, 3, 4, 5, 999_999_999, time.UTC), time.Time{}},
		{"other zones come back as UTC", time.Date(2026, 6, 30, 23, 59, 59, 1000, zone), time.Date(2027, 1, 1, 0, 0, 0, 1000, zone)},
		{"before 1970", time.Date(1969, 12, 31, 23, 59, 59, 999_999_000, time.UTC), time.Time{}},
		{"far future", time.Date(9999, 12, 31, 23, 59, 59, 999_999_000, time.UTC), time.Time{}},
	}
	for _, tt := range tests {
		k := newKey(t, tt.name, tt.created)
		k.RevokedAt = tt.revoked
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("%s: CreateAPIKey: %v", tt.name, err)
		}
		got, err := db.APIKeyByHash(ctx, k.Hash)
		if err != nil {
			t.Fatalf("%s: APIKeyByHash: %v", tt.name, err)
		}
		wantCreated := tt.created.Truncate(time.Microsecond).UTC()
		if got.CreatedAt != wantCreated {
			t.Errorf("%s: CreatedAt = %v, want %v", tt.name, got.CreatedAt, wantCreated)
		}
		wantRevoked := time.Time{}
		if !tt.revoked.IsZero() {
			wantRevoked = tt.revoked.Truncate(time.Microsecond).UTC()
		}
		if got.RevokedAt != wantRevoked {
			t.Errorf("%s: RevokedAt = %v, want %v", tt.name, got.RevokedAt, wantRevoked)
		}
	}
}

func (s suite) apiKeyConflicts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	k := newKey(t, "first", time.Now())
	if err := db.CreateAPIKey(ctx, k); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	sameHash := newKey(t, "same hash", time.Now())
	sameHash.Hash = k.Hash
	if err := db.CreateAPIKey(ctx, sameHash); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("CreateAPIKey with a duplicate hash = %v, want apperr Conflict", err)
	}
	sameID := newKey(t, "same id", time.Now())
	sameID.ID = k.ID
	if err := db.CreateAPIKey(ctx, sameID); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("CreateAPIKey with a duplicate id = %v, want apperr Conflict", err)
	}
	if keys, err := db.ListAPIKeys(ctx); err != nil || len(keys) != 1 {
		t.Errorf("ListAPIKeys after conflicts = %d keys, %v; want 1", len(keys), err)
	}
}

func (s suite) apiKeyNotFound(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	if _, err := db.APIKeyByHash(ctx, "no such hash"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("APIKeyByHash(absent) = %v, want apperr NotFound", err)
	}
	if err := db.RevokeAPIKey(ctx, "key_absent"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("RevokeAPIKey(absent) = %v, want apperr NotFound", err)
	}
	if keys, err := db.ListAPIKeys(ctx); err != nil || keys == nil || len(keys) != 0 {
		t.Errorf("ListAPIKeys on an empty table = %v, %v; want an empty non-nil list", keys, err)
	}
	if n, err := db.CountActiveAPIKeys(ctx); err != nil || n != 0 {
		t.Errorf("CountActiveAPIKeys on an empty table = %d, %v; want 0", n, err)
	}
	// The first key ends keyless mode for good: revoking it leaves the
	// mark.
	if ever, err := db.APIKeyEverCreated(ctx); err != nil || ever {
		t.Errorf("APIKeyEverCreated on an empty table = %v, %v; want false", ever, err)
	}
	_, k, err := auth.NewKey("first", []auth.Scope{auth.ScopeAdmin}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeAPIKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	n, err := db.CountActiveAPIKeys(ctx)
	ever, err2 := db.APIKeyEverCreated(ctx)
	if err != nil || err2 != nil || n != 0 || !ever {
		t.Errorf("after the only key's revocation: %d active (%v), ever created %v (%v); want 0, true", n, err, ever, err2)
	}
}

func (s suite) apiKeyListOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	late := newKey(t, "late", base.Add(time.Hour))
	early := newKey(t, "early", base)
	tieB := newKey(t, "tie b", base.Add(time.Minute))
	tieB.ID = "key_b"
	tieA := newKey(t, "tie a", base.Add(time.Minute))
	tieA.ID = "key_a"
	for _, k := range []auth.Key{late, tieB, early, tieA} {
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("CreateAPIKey(%s): %v", k.Name, err)
		}
	}
	keys, err := db.ListAPIKeys(ctx)
	if err != nil {
		t.Fatalf("ListAPIKeys: %v", err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, k.Name)
	}
	if want := []string{"early", "tie a", "tie b", "late"}; !slices.Equal(got, want) {
		t.Errorf("ListAPIKeys order = %q, want %q (created time, then id)", got, want)
	}
}

func (s suite) apiKeyRevoke(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	a, b := newKey(t, "a", time.Now()), newKey(t, "b", time.Now())
	for _, k := range []auth.Key{a, b} {
		if err := db.CreateAPIKey(ctx, k); err != nil {
			t.Fatalf("CreateAPIKey: %v", err)
		}
	}
	if n, err := db.CountActiveAPIKeys(ctx); err != nil || n != 2 {
		t.Fatalf("CountActiveAPIKeys = %d, %v; want 2", n, err)
	}
	before := time.Now().Truncate(time.Microsecond)
	if err := db.RevokeAPIKey(ctx, a.ID); err != nil {
		t.Fatalf("RevokeAPIKey: %v", err)
	}
	after := time.Now()
	got, err := db.APIKeyByHash(ctx, a.Hash)
	if err != nil {
		t.Fatalf("APIKeyByHash(revoked): %v", err)
	}
	if got.Active() || got.RevokedAt.Before(before) || got.RevokedAt.After(after) {
		t.Errorf("revoked key has RevokedAt %v, want inactive with a time in [%v, %v]", got.RevokedAt, before, after)
	}
	if n, err := db.CountActiveAPIKeys(ctx); err != nil || n != 1 {
		t.Errorf("CountActiveAPIKeys after a revocation = %d, %v; want 1", n, err)
	}
	if err := db.RevokeAPIKey(ctx, a.ID); err != nil {
		t.Errorf("RevokeAPIKey again = %v, want success", err)
	}
	if again, _ := db.APIKeyByHash(ctx, a.Hash); !again.RevokedAt.Equal(got.RevokedAt) {
		t.Errorf("second revocation moved RevokedAt from %v to %v, want the first kept", got.RevokedAt, again.RevokedAt)
	}
	if n, err := db.CountActiveAPIKeys(ctx); err != nil || n != 1 {
		t.Errorf("CountActiveAPIKeys after revoking twice = %d, %v; want 1", n, err)
	}
}

func (s suite) apiKeyConcurrentWriters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	const writers = 50
	var wg sync.WaitGroup
	for i := range writers {
		k := newKey(t, fmt.Sprintf("writer %d", i), time.Now())
		wg.Go(func() {
			if err := db.CreateAPIKey(ctx, k); err != nil {
				t.Errorf("concurrent CreateAPIKey: %v", err)
			}
			// Reads alongside writes must not fail either.
			if _, err := db.APIKeyByHash(ctx, k.Hash); err != nil {
				t.Errorf("APIKeyByHash after concurrent create: %v", err)
			}
			if i%5 == 0 {
				if err := db.RevokeAPIKey(ctx, k.ID); err != nil {
					t.Errorf("concurrent RevokeAPIKey: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n, err := db.CountActiveAPIKeys(ctx); err != nil || n != writers-writers/5 {
		t.Errorf("CountActiveAPIKeys after %d concurrent writers = %d, %v; want %d", writers, n, err, writers-writers/5)
	}
}
