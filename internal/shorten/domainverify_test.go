package shorten_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

// txtRecords is a TXT lookup answering from a map, NXDOMAIN for the rest.
type txtRecords struct {
	mu sync.Mutex
	m  map[string][]string
}

func (r *txtRecords) set(name string, values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[name] = values
}

func (r *txtRecords) lookup(_ context.Context, name string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.m[name]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
	}
	return slices.Clone(v), nil
}

func TestDomainOwnHosts(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *shorten.Options) {
		o.Domains.OwnHosts = []string{"Admin.Example.com.", "api.example.com:443", "10.0.0.1"}
	})
	ctx := t.Context()
	admin := shorten.Caller{Admin: true}
	for _, name := range []string{"sho.rt", "ADMIN.example.com", "api.example.com"} {
		_, err := b.svc.CreateDomain(ctx, admin, name, "")
		ae, ok := errors.AsType[*apperr.Error](err)
		if !apperr.Is(err, apperr.Unprocessable) || !ok || ae.Fields[0].Field != "domain" {
			t.Errorf("CreateDomain(%q) = %v, want 422 naming domain", name, err)
		}
	}
	// One registered before the host was the server's own: not served.
	now := b.clock.Now()
	if _, err := b.store.CreateDomain(ctx, shorten.Domain{Name: "api.example.com", Token: "t", CreatedAt: now, VerifiedAt: now, FallbackURL: "https://tenant.example/"},
		shorten.DomainLimits{}); err != nil {
		t.Fatal(err)
	}
	b.create(t, shorten.CreateRequest{URL: "https://example.com/own", Slug: "spring"})
	if names, err := b.svc.CheckOwnHosts(ctx); err != nil || !slices.Equal(names, []string{"api.example.com"}) {
		t.Errorf("CheckOwnHosts = %v, %v; want api.example.com", names, err)
	}
	if tg, err := b.svc.ResolveHost(ctx, "api.example.com", "spring", "c"); err != nil || tg.URL != "https://example.com/own" {
		t.Errorf("ResolveHost on an own host registered as a domain = %+v, %v; want the server's own link", tg, err)
	}
}

func TestDomainClaimsVerified(t *testing.T) {
	t.Parallel()
	dns := &txtRecords{m: map[string][]string{}}
	b := setup(t, func(o *shorten.Options) { o.Domains.Verify, o.Domains.LookupTXT = true, dns.lookup })
	ctx := t.Context()
	ka, kb := shorten.Caller{ID: "key_a"}, shorten.Caller{ID: "key_b"}
	da, err := b.svc.CreateDomain(ctx, ka, "go.example.com", "https://example.com/home")
	if err != nil || da.Verified() || len(da.Token) != 40 {
		t.Fatalf("CreateDomain = %+v, %v; want an unverified claim with a token", da, err)
	}
	db, err := b.svc.CreateDomain(ctx, kb, "go.example.com", "")
	if err != nil || db.Token == da.Token {
		t.Fatalf("CreateDomain(second claim) = %+v, %v", db, err)
	}
	if _, err := b.svc.Create(ctx, shorten.CreateRequest{URL: "https://example.com/x", Domain: "go.example.com", Owner: "key_a"}); !apperr.Is(err, apperr.Unprocessable) ||
		!strings.Contains(err.Error(), "invalid") {
		t.Errorf("Create on a claim = %v, want 422", err)
	}
	b.create(t, shorten.CreateRequest{URL: "https://example.com/plain", Slug: "spring"})
	for _, code := range []string{"spring", "nothing"} {
		if tg, err := b.svc.ResolveHost(ctx, "go.example.com", code, "c"); err != shorten.ErrNotFound {
			t.Errorf("ResolveHost(%s) on a claimed domain = %+v, %v; want ErrNotFound, no fallback", code, tg, err)
		}
	}
	if n, err := b.svc.CheckDomainClaims(ctx); n != 0 || err != nil {
		t.Errorf("CheckDomainClaims without a record = %d, %v", n, err)
	}
	if d, why, err := b.svc.VerifyDomain(ctx, ka, "go.example.com"); err != nil || d.Verified() || !strings.Contains(why, "no TXT record named _sluice.go.example.com") {
		t.Errorf("VerifyDomain without a record = %+v, %q, %v", d, why, err)
	}
	dns.set("_sluice.go.example.com", "  "+db.Token+" ")
	if n, err := b.svc.CheckDomainClaims(ctx); n != 1 || err != nil {
		t.Fatalf("CheckDomainClaims = %d, %v; want the second claim verified", n, err)
	}
	if _, err := b.svc.Domain(ctx, ka, "go.example.com"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("Domain(the losing claim) = %v, want NotFound", err)
	}
	if d, err := b.svc.Domain(ctx, kb, "go.example.com"); err != nil || !d.Verified() {
		t.Errorf("Domain(the winning claim) = %+v, %v", d, err)
	}
	if _, err := b.svc.CreateDomain(ctx, ka, "go.example.com", ""); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("CreateDomain(a verified domain) = %v, want Conflict", err)
	}
	if _, err := b.svc.Create(ctx, shorten.CreateRequest{URL: "https://example.com/go", Slug: "spring", Domain: "go.example.com", Owner: "key_b"}); err != nil {
		t.Fatal(err)
	}
	if tg, err := b.svc.ResolveHost(ctx, "go.example.com", "spring", "c"); err != nil || tg.URL != "https://example.com/go" {
		t.Errorf("ResolveHost on the verified domain = %+v, %v", tg, err)
	}
}

// TestDomainSetCost measures what each registered domain costs every node
// (its entry in the redirect path's set), for docs/security.md's bounds
// table: a typical one, and the largest a client can register (a
// 253-byte name and a 2,048-byte fallback URL). Not parallel, so that no
// other test allocates while it measures.
func TestDomainSetCost(t *testing.T) {
	const n = 500 // enough for a steady figure (a few KB of noise over 200 KB); 2,000 took 99 s under load
	for _, c := range []struct {
		name      string
		host      func(i int) string
		fallback  string
		atMostPer int
	}{
		{"typical", func(i int) string { return fmt.Sprintf("go%d.example.com", i) }, "https://example.com/", 1024},
		{"largest", func(i int) string {
			label := strings.Repeat("a", 63)
			return fmt.Sprintf("%s.%s.%s.%s", label, label, label, fmt.Sprintf("x%058d", i))
		}, "https://example.com/" + strings.Repeat("f", 2048-len("https://example.com/")), 8192},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, nil)
			ctx := t.Context()
			now := b.clock.Now()
			for i := range n {
				d := shorten.Domain{Name: c.host(i), Owner: "key_0123456789abcdef", FallbackURL: c.fallback, Token: strings.Repeat("0", 40), CreatedAt: now, VerifiedAt: now}
				if _, err := b.store.CreateDomain(ctx, d, shorten.DomainLimits{}); err != nil {
					t.Fatal(err)
				}
			}
			before := heapBytes()
			if tg, err := b.svc.ResolveHost(ctx, c.host(0), "spring", "c"); err != nil || tg.URL != c.fallback {
				t.Fatalf("ResolveHost = %+v, %v; want the domain's fallback (the set loaded)", tg, err)
			}
			after := heapBytes()
			runtime.KeepAlive(b.svc)
			per := int64(after-before) / n
			t.Logf("%s domains: %d bytes each in the node's set (%d domains, heap %d -> %d)", c.name, per, n, before, after)
			if per > int64(c.atMostPer) {
				t.Errorf("a %s domain costs %d bytes, want at most %d", c.name, per, c.atMostPer)
			}
		})
	}
}

// heapBytes is the live heap after a collection.
func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
