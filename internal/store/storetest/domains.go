package storetest

import (
	"cmp"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

func (s suite) domains(t *testing.T) {
	t.Run("CreateListDelete", s.domainCreateListDelete)
	t.Run("CodesPerDomain", s.domainCodes)
	t.Run("Claims", s.domainClaims)
	t.Run("ClaimLinks", s.domainClaimLinks)
	t.Run("Limits", s.domainLimits)
	t.Run("ConcurrentVerify", s.domainConcurrentVerify)
}

// verified is d registered without proof, as while verification is off.
func verified(d shorten.Domain) shorten.Domain {
	d.VerifiedAt = d.CreatedAt
	d.Token = cmp.Or(d.Token, "token-"+d.Owner)
	return d
}

func (s suite) domainCreateListDelete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)
	d, err := db.CreateDomain(ctx, verified(shorten.Domain{Name: "go.example.com", Owner: "key_a", FallbackURL: "https://example.com/", CreatedAt: at}), shorten.DomainLimits{})
	if err != nil {
		t.Fatalf("CreateDomain: %v", err)
	}
	if !d.CreatedAt.Equal(at.Truncate(time.Microsecond)) || !d.VerifiedAt.Equal(d.CreatedAt) || d.Token != "token-key_a" {
		t.Errorf("CreatedAt, VerifiedAt, Token = %v, %v, %q; want %v twice and token-key_a", d.CreatedAt, d.VerifiedAt, d.Token, at.Truncate(time.Microsecond))
	}
	for _, b := range []shorten.Domain{verified(shorten.Domain{Name: "go.example.com", Owner: "key_b", CreatedAt: at}),
		{Name: "go.example.com", Owner: "key_b", CreatedAt: at, Token: "t"}} {
		if _, err := db.CreateDomain(ctx, b, shorten.DomainLimits{}); !apperr.Is(err, apperr.Conflict) {
			t.Errorf("CreateDomain(taken, verified %v) = %v, want Conflict", b.Verified(), err)
		}
	}
	if _, err := db.CreateDomain(ctx, verified(shorten.Domain{Name: "a.example.org", Owner: "key_b", CreatedAt: at}), shorten.DomainLimits{}); err != nil {
		t.Fatal(err)
	}
	all, err := db.Domains(ctx, 10)
	if err != nil || len(all) != 2 || all[0].Name != "a.example.org" || all[1] != d {
		t.Errorf("Domains = %+v, %v; want a.example.org then %+v", all, err, d)
	}
	if got, err := db.DomainClaims(ctx, "go.example.com"); err != nil || len(got) != 1 || got[0] != d {
		t.Errorf("DomainClaims = %+v, %v; want %+v", got, err, d)
	}
	if got, err := db.DomainClaims(ctx, "nope.example.com"); err != nil || got == nil || len(got) != 0 {
		t.Errorf("DomainClaims(unknown) = %#v, %v, want an empty slice", got, err)
	}
	if one, err := db.Domains(ctx, 1); err != nil || len(one) != 1 {
		t.Errorf("Domains(limit 1) = %+v, %v; want one", one, err)
	}
	// The fallback changes in place, and clears.
	want := d
	want.FallbackURL = "https://example.com/sale"
	if got, err := db.UpdateDomain(ctx, "go.example.com", "key_a", want.FallbackURL); err != nil || got != want {
		t.Errorf("UpdateDomain = %+v, %v; want %+v", got, err, want)
	}
	if got, err := db.DomainClaims(ctx, "go.example.com"); err != nil || len(got) != 1 || got[0] != want {
		t.Errorf("DomainClaims after UpdateDomain = %+v, %v; want %+v", got, err, want)
	}
	want.FallbackURL = ""
	if got, err := db.UpdateDomain(ctx, "go.example.com", "key_a", ""); err != nil || got != want {
		t.Errorf("UpdateDomain(clear) = %+v, %v; want %+v", got, err, want)
	}
	if _, err := db.UpdateDomain(ctx, "nope.example.com", "key_a", ""); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("UpdateDomain(unknown) = %v, want NotFound", err)
	}
	if _, err := db.UpdateDomain(ctx, "go.example.com", "key_b", ""); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("UpdateDomain(another owner's) = %v, want NotFound", err)
	}
	// A domain with links is kept; without, it goes.
	if _, _, err := db.CreateLinks(ctx, []shorten.NewLink{{Domain: "go.example.com", Code: "spring", URL: "https://example.com/s", CreatedAt: at}}, codeOf); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteDomain(ctx, "go.example.com", "key_b"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("DeleteDomain(another owner's) = %v, want NotFound", err)
	}
	if err := db.DeleteDomain(ctx, "go.example.com", "key_a"); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("DeleteDomain(with links) = %v, want Conflict", err)
	}
	if err := db.DeleteLink(ctx, "go.example.com", "spring"); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteDomain(ctx, "go.example.com", "key_a"); err != nil {
		t.Errorf("DeleteDomain = %v", err)
	}
	if err := db.DeleteDomain(ctx, "go.example.com", "key_a"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("DeleteDomain(gone) = %v, want NotFound", err)
	}
	if all, err := db.Domains(ctx, 10); err != nil || len(all) != 1 || all[0].Name != "a.example.org" {
		t.Errorf("Domains after delete = %+v, %v", all, err)
	}
}

func (s suite) domainCodes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	now := time.Now()
	for _, d := range []string{"go.example.com", "x.example.org"} {
		if _, err := db.CreateDomain(ctx, verified(shorten.Domain{Name: d, Owner: "key_a", CreatedAt: now}), shorten.DomainLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	in := []shorten.NewLink{
		{Code: "spring", URL: "https://example.com/none", Owner: "key_a", CreatedAt: now},
		{Domain: "go.example.com", Code: "spring", URL: "https://example.com/go", Owner: "key_a", CreatedAt: now},
		{Domain: "x.example.org", Code: "spring", URL: "https://example.com/x", Owner: "key_a", CreatedAt: now},
		{Domain: "go.example.com", Code: "spring", URL: "https://example.com/again", Owner: "key_a", CreatedAt: now},
	}
	out, created, err := db.CreateLinks(ctx, in, codeOf)
	if err != nil {
		t.Fatal(err)
	}
	if !created[0] || !created[1] || !created[2] || created[3] {
		t.Fatalf("created = %v, want the same slug once per domain", created)
	}
	for i, domain := range []string{"", "go.example.com", "x.example.org"} {
		l, err := db.LinkByCode(ctx, domain, "spring")
		if err != nil || l.ID != out[i].ID || l.Domain != domain || l.URL != in[i].URL {
			t.Errorf("LinkByCode(%q, spring) = %+v, %v; want %+v", domain, l, err, out[i])
		}
	}
	if _, err := db.LinkByCode(ctx, "y.example.org", "spring"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("LinkByCode(other domain) = %v, want NotFound", err)
	}
	// A link on a domain not registered is skipped, the others of its
	// batch go in.
	out2, created2, err := db.CreateLinks(ctx, []shorten.NewLink{
		{Domain: "y.example.org", Code: "spring", URL: "https://example.com/y", CreatedAt: now},
		{Domain: "x.example.org", Code: "summer", URL: "https://example.com/x2", CreatedAt: now},
	}, codeOf)
	if err != nil || created2[0] || !created2[1] || out2[1].Code != "summer" {
		t.Errorf("CreateLinks on an unregistered domain = %+v %v, %v; want it skipped and the other link in", out2, created2, err)
	}
	if _, err := db.LinkByCode(ctx, "y.example.org", "spring"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("LinkByCode(unregistered domain) = %v, want NotFound", err)
	}
	if err := db.DeleteLink(ctx, "x.example.org", "summer"); err != nil {
		t.Fatal(err)
	}
	if l, err := db.SetLinkRules(ctx, "x.example.org", "spring", nil); err != nil || l.ID != out[2].ID {
		t.Errorf("SetLinkRules(x.example.org) = %+v, %v", l, err)
	}
	none, on := "", "go.example.com"
	for _, c := range []struct {
		domain *string
		want   []int64
	}{{nil, []int64{out[2].ID, out[1].ID, out[0].ID}}, {&none, []int64{out[0].ID}}, {&on, []int64{out[1].ID}}} {
		ls, err := db.ListLinks(ctx, "key_a", c.domain, 0, 10)
		var got []int64
		for _, l := range ls {
			got = append(got, l.ID)
		}
		if err != nil || len(got) != len(c.want) || (len(got) > 0 && got[0] != c.want[0]) {
			t.Errorf("ListLinks(domain %v) = %v, %v; want %v", c.domain, got, err, c.want)
		}
	}
	if top, err := db.TopLinks(ctx, "key_a", false, &on, 10); err != nil || len(top) != 1 || top[0].ID != out[1].ID {
		t.Errorf("TopLinks(key_a, go.example.com) = %+v, %v; want its one link", top, err)
	}
	if top, err := db.TopLinks(ctx, "", true, &none, 10); err != nil || len(top) != 1 || top[0].ID != out[0].ID {
		t.Errorf("TopLinks(all, no domain) = %+v, %v; want the link without a domain", top, err)
	}
	if top, err := db.TopLinks(ctx, "", true, nil, 10); err != nil || len(top) != 3 {
		t.Errorf("TopLinks(all) = %+v, %v; want all three", top, err)
	}
	if err := db.DeleteLink(ctx, "go.example.com", "spring"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LinkByCode(ctx, "", "spring"); err != nil {
		t.Errorf("the link without a domain went with the other domain's: %v", err)
	}
	if _, err := db.LinkByCode(ctx, "go.example.com", "spring"); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("LinkByCode(deleted) = %v, want NotFound", err)
	}
}
