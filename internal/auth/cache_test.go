package auth_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
)

// fakeKeys is a key store whose answers and failure the test sets.
type fakeKeys struct {
	mu    sync.Mutex
	keys  map[string]auth.Key
	err   error
	calls int
}

func (f *fakeKeys) APIKeyByHash(_ context.Context, hash string) (auth.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return auth.Key{}, f.err
	}
	k, ok := f.keys[hash]
	if !ok {
		return auth.Key{}, apperr.New(apperr.NotFound, "no such key")
	}
	return k, nil
}

func (f *fakeKeys) set(err error, revoke string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
	if k, ok := f.keys[revoke]; ok {
		k.RevokedAt = time.Unix(1, 0)
		f.keys[revoke] = k
	}
}

// TestCache: answers are cached for TTL, a revoked key is noticed after
// it, and while the store fails only active keys serve stale unless
// StaleRefusals, and only for the errors StaleIf names. Not parallel:
// AllocsPerRun measures the hits.
func TestCache(t *testing.T) {
	secret, key, err := auth.NewKey("k", []auth.Scope{auth.ScopeAdmin}, time.Unix(0, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, revoked, err := auth.NewKey("r", nil, time.Unix(0, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(100, 0)
	clock := func() time.Time { return now }
	down := apperr.New(apperr.Unavailable, "store down")
	for _, tc := range []struct {
		name          string
		o             auth.CacheOptions
		revokedStale  bool // a revoked key's answer serves while the store is down
		otherErrStale bool // an active key's answer serves for an error StaleIf refuses
	}{
		{name: "default", o: auth.CacheOptions{Now: clock}, otherErrStale: true},
		{name: "refusals", revokedStale: true, o: auth.CacheOptions{Now: clock, StaleRefusals: true,
			StaleIf: func(err error) bool { return apperr.Is(err, apperr.Unavailable) }}},
	} {
		now = time.Unix(100, 0)
		store := &fakeKeys{keys: map[string]auth.Key{key.Hash: key, revoked.Hash: revoked}}
		c := auth.NewCache(store, tc.o)
		lookup := func(secret string) (auth.Answer, error) {
			return c.Lookup(t.Context(), auth.SumSecret(secret))
		}
		if a, err := lookup(secret); err != nil || !a.Found || a.Key.ID != key.ID || a.Stale != nil {
			t.Fatalf("%s: first lookup = %+v, %v", tc.name, a, err)
		}
		if _, err := lookup(other); err != nil {
			t.Fatal(err)
		}
		store.set(nil, revoked.Hash)
		if a, _ := lookup(other); !a.Key.Active() {
			t.Errorf("%s: revoked key within TTL = %+v, want the cached active answer", tc.name, a)
		}
		if got := testing.AllocsPerRun(100, func() { _, _ = lookup(secret) }); got != 0 {
			t.Errorf("%s: a cache hit allocates %v times, want 0", tc.name, got)
		}
		if store.calls != 2 {
			t.Errorf("%s: %d store calls, want 2", tc.name, store.calls)
		}
		now = now.Add(3 * time.Second)
		if a, _ := lookup(other); a.Key.Active() {
			t.Errorf("%s: revoked key after TTL = %+v, want revoked", tc.name, a)
		}
		store.set(down, "")
		now = now.Add(10 * time.Minute)
		if a, err := lookup(secret); err != nil || !a.Found || a.Stale == nil {
			t.Errorf("%s: active key, store down = %+v, %v; want the stale answer", tc.name, a, err)
		}
		if _, err := lookup(other); (err == nil) != tc.revokedStale {
			t.Errorf("%s: revoked key, store down: err %v, want stale %v", tc.name, err, tc.revokedStale)
		}
		store.set(errors.New("bad query"), "")
		if _, err := lookup(secret); (err == nil) != tc.otherErrStale {
			t.Errorf("%s: active key, other store error: err %v, want stale %v", tc.name, err, tc.otherErrStale)
		}
		store.set(down, "")
		now = now.Add(6 * time.Minute)
		if _, err := lookup(secret); !errors.Is(err, down) {
			t.Errorf("%s: active key, store down past StaleIfError: err %v, want %v", tc.name, err, down)
		}
		c.Forget()
		store.set(nil, "")
		calls := store.calls
		if _, err := lookup(secret); err != nil || store.calls != calls+1 {
			t.Errorf("%s: after Forget: err %v, %d store calls, want 1", tc.name, err, store.calls-calls)
		}
	}
}
