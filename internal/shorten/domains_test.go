package shorten_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
)

func TestNormalizeDomain(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"go.example.com": "go.example.com", "Go.Example.COM": "go.example.com", "Bücher.example": "xn--bcher-kva.example",
		"xn--bcher-kva.example": "xn--bcher-kva.example", "a-b.c-d.example": "a-b.c-d.example",
	} {
		if got, err := shorten.NormalizeDomain(in); err != nil || got != want {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "example", "go.example.com.", "go.example.com:80", "http://go.example.com", "go.example.com/x",
		"127.0.0.1", "::1", "[::1]", "2130706433", "go..example.com", "-go.example.com", "go-.example.com", "go_x.example.com",
		"a b.example.com", "localhost", "x.localhost", "user@go.example.com", "xn--zz.example"} {
		if got, err := shorten.NormalizeDomain(bad); err == nil {
			t.Errorf("NormalizeDomain(%q) = %q, want refused", bad, got)
		}
	}
}

func TestRequestHostAndKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"Go.Example.com:8080": "go.example.com", "go.example.com.": "go.example.com",
		"go.example.com": "go.example.com", "[::1]:80": "", "127.0.0.1:8080": "127.0.0.1"} {
		if got := shorten.RequestHost(in); got != want {
			t.Errorf("RequestHost(%q) = %q, want %q", in, got, want)
		}
	}
	if k := shorten.Key("", "abc"); k != "abc" {
		t.Errorf("Key without a domain = %q, want the code", k)
	}
	if d, c := shorten.SplitKey(shorten.Key("go.example.com", "abc")); d != "go.example.com" || c != "abc" {
		t.Errorf("SplitKey(Key) = %q %q", d, c)
	}
}

// TestDomainsReadAgainAfterCacheTTL: a domain registered where this node
// did not hear of it (another node, its announcement lost) answers here
// once this node's list is older than CacheTTL, not before.
func TestDomainsReadAgainAfterCacheTTL(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *shorten.Options) { o.CacheTTL = 30 * time.Second })
	ctx := t.Context()
	b.create(t, shorten.CreateRequest{URL: "https://example.com/plain", Slug: "spring"})
	if tg, err := b.svc.ResolveHost(ctx, "go.example.com", "spring", "c"); err != nil || tg.URL != "https://example.com/plain" {
		t.Fatalf("ResolveHost before the domain = %+v, %v; want the link without a domain", tg, err)
	}
	if _, err := b.store.CreateDomain(ctx, shorten.Domain{Name: "go.example.com", FallbackURL: "https://example.com/home", CreatedAt: b.clock.Now(), VerifiedAt: b.clock.Now()},
		shorten.DomainLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.CreateLinks(ctx, []shorten.NewLink{{Domain: "go.example.com", Code: "spring", URL: "https://example.com/go", CreatedAt: b.clock.Now()}},
		func(int64) (string, error) { return "x", nil }); err != nil {
		t.Fatal(err)
	}
	if tg, err := b.svc.ResolveHost(ctx, "go.example.com", "spring", "c"); err != nil || tg.URL != "https://example.com/plain" {
		t.Errorf("ResolveHost within CacheTTL = %+v, %v; want the list read before", tg, err)
	}
	b.clock.Advance(31 * time.Second)
	if tg, err := b.svc.ResolveHost(ctx, "go.example.com", "spring", "c"); err != nil || tg.URL != "https://example.com/go" {
		t.Errorf("ResolveHost past CacheTTL = %+v, %v; want the domain's link", tg, err)
	}
	if tg, err := b.svc.ResolveHost(ctx, "go.example.com", "nothing", "c"); err != nil || !tg.Unknown || tg.URL != "https://example.com/home" {
		t.Errorf("ResolveHost of an unknown code = %+v, %v; want the domain's fallback", tg, err)
	}
	if tg, err := b.svc.ResolveHost(ctx, "sho.rt", "spring", "c"); err != nil || tg.URL != "https://example.com/plain" {
		t.Errorf("ResolveHost on the base host = %+v, %v; want the link without a domain", tg, err)
	}
}
