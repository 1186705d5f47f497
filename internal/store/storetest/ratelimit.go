package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

func (s suite) ratelimit(t *testing.T) {
	t.Run("DefaultPolicies", s.defaultPolicies)
	t.Run("PolicyRoundTrip", s.policyRoundTrip)
	t.Run("Blocks", s.blocks)
}

func (s suite) defaultPolicies(t *testing.T) {
	t.Parallel()
	db := s.migrated(t)
	got, err := db.ListPolicies(t.Context())
	if err != nil {
		t.Fatalf("ListPolicies: %v", err)
	}
	want := limits.Defaults()
	slices.SortFunc(want, func(a, b limits.NamedPolicy) int { return compareNames(a.Name, b.Name) })
	if !slices.Equal(got, want) {
		t.Errorf("ListPolicies after migration = %+v, want the shipped tiers %+v", got, want)
	}
}

func compareNames(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s suite) policyRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	tests := []struct {
		name string
		p    limits.NamedPolicy
	}{
		{"soft sliding log", limits.NamedPolicy{Name: "login_ip", Algorithm: ratelimit.SlidingWindowLog, Limit: 5,
			Period: limits.Period(time.Minute), Mode: limits.Soft, BurstOver: 2, OnStoreFailure: limits.FailClosed, MaxDebt: 7,
			Description: "five a minute ünicode"}},
		{"shadow gcra with a sub-second period", limits.NamedPolicy{Name: "a.b-c_d", Algorithm: ratelimit.GCRA, Limit: 3,
			Period: limits.Period(1500 * time.Millisecond), Burst: 9, Mode: limits.Shadow, OnStoreFailure: limits.FailOpen}},
		{"a day", limits.NamedPolicy{Name: "daily", Algorithm: ratelimit.FixedWindow, Limit: 1 << 40,
			Period: limits.Period(24 * time.Hour), Mode: limits.Hard, OnStoreFailure: limits.FailOpen}},
		{"local sync", limits.NamedPolicy{Name: "edge", Algorithm: ratelimit.TokenBucket, Limit: 1000,
			Period: limits.Period(time.Second), Mode: limits.Hard, OnStoreFailure: limits.FailOpen,
			Sync: limits.SyncLocal, SyncInterval: limits.Period(50 * time.Millisecond)}},
	}
	for _, tt := range tests {
		created, err := db.PutPolicy(ctx, tt.p)
		if err != nil || !created {
			t.Fatalf("%s: PutPolicy = %v, %v; want created", tt.name, created, err)
		}
	}
	changed := tests[0].p
	changed.Limit, changed.Mode, changed.BurstOver = 10, limits.Hard, 0
	if created, err := db.PutPolicy(ctx, changed); err != nil || created {
		t.Fatalf("PutPolicy over an existing one = %v, %v; want replaced", created, err)
	}
	got, err := db.ListPolicies(ctx)
	if err != nil {
		t.Fatalf("ListPolicies: %v", err)
	}
	byName := map[string]limits.NamedPolicy{}
	for _, p := range got {
		byName[p.Name] = p
	}
	for _, want := range []limits.NamedPolicy{changed, tests[1].p, tests[2].p} {
		if byName[want.Name] != want {
			t.Errorf("stored %q = %+v, want %+v", want.Name, byName[want.Name], want)
		}
	}
	if err := db.DeletePolicy(ctx, "daily"); err != nil {
		t.Errorf("DeletePolicy: %v", err)
	}
	if err := db.DeletePolicy(ctx, "daily"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("DeletePolicy again = %v, want NotFound", err)
	}
	if got, _ := db.ListPolicies(ctx); len(got) != 6 {
		t.Errorf("after one delete, %d policies, want 6 (3 tiers + 3)", len(got))
	}
}

func (s suite) blocks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	// PutBlock sweeps blocks that expired a day before the store's clock,
	// so these times are near the real now.
	now := time.Now().Truncate(time.Microsecond).UTC()
	put := func(key, policy, domain string, expires time.Time) {
		t.Helper()
		b := limits.Block{Key: key, Policy: policy, Domain: domain, Reason: "abuse " + key, CreatedAt: now, ExpiresAt: expires}
		if err := db.PutBlock(ctx, b); err != nil {
			t.Fatalf("PutBlock(%s, %q, %q): %v", key, policy, domain, err)
		}
	}
	const entry = "remote_address=203.0.113.9"
	put("ip:1", "", "", now.Add(time.Hour))
	put("ip:1", "login", "", now.Add(time.Minute))
	put("ip:2", "", "", now.Add(-time.Second)) // expired
	put("ip:1", "login", "", now.Add(2*time.Minute))
	put(entry, "", "edge", now.Add(time.Hour))
	put(entry, "", "", now.Add(time.Minute)) // another block: another domain
	put(entry, "", "api", now.Add(time.Minute))
	put(entry, "", "api", now.Add(3*time.Minute)) // replaces the one above

	got, err := db.ListBlocks(ctx, now)
	if err != nil {
		t.Fatalf("ListBlocks: %v", err)
	}
	want := []limits.Block{
		{Key: "ip:1", Policy: "", Reason: "abuse ip:1", CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
		{Key: "ip:1", Policy: "login", Reason: "abuse ip:1", CreatedAt: now, ExpiresAt: now.Add(2 * time.Minute)},
		{Key: entry, Reason: "abuse " + entry, CreatedAt: now, ExpiresAt: now.Add(time.Minute)},
		{Key: entry, Domain: "api", Reason: "abuse " + entry, CreatedAt: now, ExpiresAt: now.Add(3 * time.Minute)},
		{Key: entry, Domain: "edge", Reason: "abuse " + entry, CreatedAt: now, ExpiresAt: now.Add(time.Hour)},
	}
	if !slices.EqualFunc(got, want, func(a, b limits.Block) bool {
		return a.Key == b.Key && a.Policy == b.Policy && a.Domain == b.Domain && a.Reason == b.Reason &&
			a.CreatedAt.Equal(b.CreatedAt) && a.ExpiresAt.Equal(b.ExpiresAt)
	}) {
		t.Errorf("ListBlocks = %+v, want the active ones by key, policy and domain, the re-put ones replaced: %+v", got, want)
	}
	login := "login"
	if n, err := db.DeleteBlocks(ctx, "ip:1", &login, nil); err != nil || n != 1 {
		t.Errorf("DeleteBlocks(ip:1, login) = %d, %v; want 1", n, err)
	}
	put("ip:1", "login", "", now.Add(time.Minute))
	if n, err := db.DeleteBlocks(ctx, "ip:1", nil, nil); err != nil || n != 2 {
		t.Errorf("DeleteBlocks(ip:1, every policy) = %d, %v; want 2", n, err)
	}
	if n, err := db.DeleteBlocks(ctx, "ip:9", nil, nil); err != nil || n != 0 {
		t.Errorf("DeleteBlocks(absent) = %d, %v; want 0", n, err)
	}
	edge, none := "edge", ""
	if n, err := db.DeleteBlocks(ctx, entry, nil, &edge); err != nil || n != 1 {
		t.Errorf("DeleteBlocks(%s, domain edge) = %d, %v; want 1", entry, n, err)
	}
	if n, err := db.DeleteBlocks(ctx, entry, &none, &none); err != nil || n != 1 {
		t.Errorf("DeleteBlocks(%s, every policy, no domain) = %d, %v; want 1", entry, n, err)
	}
	if got, _ := db.ListBlocks(ctx, now); len(got) != 1 || got[0].Domain != "api" {
		t.Errorf("ListBlocks after deleting = %+v, want the block in domain api alone", got)
	}
	if n, err := db.DeleteBlocks(ctx, entry, nil, nil); err != nil || n != 1 {
		t.Errorf("DeleteBlocks(%s, every block) = %d, %v; want 1", entry, n, err)
	}
	if got, _ := db.ListBlocks(ctx, now); len(got) != 0 {
		t.Errorf("ListBlocks after deleting = %+v, want none", got)
	}
}
