package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/shorten"
)

// domainClaims: several owners claim a name, each with its own token; the
// first verified wins and the others' claims go; a verified name is then
// no one else's to claim or verify, and verifying it again changes nothing.
func (s suite) domainClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	var claims []shorten.Domain
	for i, owner := range []string{"key_a", "key_b", "key_c"} {
		c, err := db.CreateDomain(ctx, shorten.Domain{Name: "go.example.com", Owner: owner, Token: "tok-" + owner, CreatedAt: at.Add(time.Duration(i) * time.Second)},
			shorten.DomainLimits{})
		if err != nil || c.Verified() {
			t.Fatalf("CreateDomain(claim by %s) = %+v, %v; want an unverified claim", owner, c, err)
		}
		claims = append(claims, c)
	}
	if _, err := db.CreateDomain(ctx, shorten.Domain{Name: "go.example.com", Owner: "key_b", Token: "again", CreatedAt: at}, shorten.DomainLimits{}); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("CreateDomain(the same owner's claim again) = %v, want Conflict", err)
	}
	if _, err := db.CreateDomain(ctx, verified(shorten.Domain{Name: "go.example.com", Owner: "key_d", CreatedAt: at}), shorten.DomainLimits{}); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("CreateDomain(verified, over pending claims) = %v, want Conflict", err)
	}
	got, err := db.DomainClaims(ctx, "go.example.com")
	if err != nil || len(got) != 3 || got[0] != claims[0] || got[1] != claims[1] || got[2] != claims[2] {
		t.Fatalf("DomainClaims = %+v, %v; want the three claims, oldest first", got, err)
	}
	// A claim is no link's domain.
	if _, created, err := db.CreateLinks(ctx, []shorten.NewLink{{Domain: "go.example.com", Code: "early", URL: "https://example.com/e", Owner: "key_b", CreatedAt: at}}, codeOf); err != nil || created[0] {
		t.Errorf("CreateLinks on a claimed, unverified domain = %v, %v; want it skipped", created, err)
	}
	if _, err := db.VerifyDomain(ctx, "go.example.com", "key_z", at); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("VerifyDomain(no claim) = %v, want NotFound", err)
	}
	vat := at.Add(time.Hour)
	v, err := db.VerifyDomain(ctx, "go.example.com", "key_b", vat)
	want := claims[1]
	want.VerifiedAt = vat
	if err != nil || v != want {
		t.Fatalf("VerifyDomain(key_b) = %+v, %v; want %+v", v, err, want)
	}
	if got, err := db.DomainClaims(ctx, "go.example.com"); err != nil || len(got) != 1 || got[0] != want {
		t.Errorf("DomainClaims after verify = %+v, %v; want key_b's alone", got, err)
	}
	if again, err := db.VerifyDomain(ctx, "go.example.com", "key_b", vat.Add(time.Hour)); err != nil || again != want {
		t.Errorf("VerifyDomain(again) = %+v, %v; want %+v unchanged", again, err, want)
	}
	if _, err := db.VerifyDomain(ctx, "go.example.com", "key_a", vat); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("VerifyDomain(a dropped claim) = %v, want Conflict", err)
	}
	if _, err := db.CreateDomain(ctx, shorten.Domain{Name: "go.example.com", Owner: "key_a", Token: "t", CreatedAt: vat}, shorten.DomainLimits{}); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("CreateDomain(claim of a verified domain) = %v, want Conflict", err)
	}
	// An unverified claim goes without looking for links.
	if _, err := db.CreateDomain(ctx, shorten.Domain{Name: "x.example.org", Owner: "key_a", Token: "t", CreatedAt: at}, shorten.DomainLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteDomain(ctx, "x.example.org", "key_a"); err != nil {
		t.Errorf("DeleteDomain(claim) = %v", err)
	}
}

// domainClaimLinks: links land on a domain once it is verified.
func (s suite) domainClaimLinks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	at := time.Now()
	if _, err := db.CreateDomain(ctx, shorten.Domain{Name: "go.example.com", Owner: "key_a", Token: "t", CreatedAt: at}, shorten.DomainLimits{}); err != nil {
		t.Fatal(err)
	}
	link := []shorten.NewLink{{Domain: "go.example.com", Code: "spring", URL: "https://example.com/s", Owner: "key_a", CreatedAt: at}}
	if _, created, err := db.CreateLinks(ctx, link, codeOf); err != nil || created[0] {
		t.Fatalf("CreateLinks before verify = %v, %v; want skipped", created, err)
	}
	if _, err := db.VerifyDomain(ctx, "go.example.com", "key_a", at); err != nil {
		t.Fatal(err)
	}
	if _, created, err := db.CreateLinks(ctx, link, codeOf); err != nil || !created[0] {
		t.Fatalf("CreateLinks after verify = %v, %v; want created", created, err)
	}
	if err := db.DeleteDomain(ctx, "go.example.com", "key_a"); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("DeleteDomain(verified, with links) = %v, want Conflict", err)
	}
}

// domainLimits: one owner's rows, claims included, and all rows are capped
// with TooMany; deleting one makes room again.
func (s suite) domainLimits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	at := time.Now()
	limits := shorten.DomainLimits{PerOwner: 3, Total: 5}
	add := func(owner string, i int) error {
		_, err := db.CreateDomain(ctx, shorten.Domain{Name: fmt.Sprintf("d%d.example.com", i), Owner: owner, Token: "t", CreatedAt: at}, limits)
		return err
	}
	for i := range 3 {
		if err := add("key_a", i); err != nil {
			t.Fatal(err)
		}
	}
	if err := add("key_a", 3); !apperr.Is(err, apperr.TooMany) {
		t.Errorf("CreateDomain(past the owner's cap) = %v, want TooMany", err)
	}
	for i := 3; i < 5; i++ {
		if err := add("key_b", i); err != nil {
			t.Fatal(err)
		}
	}
	if err := add("key_c", 5); !apperr.Is(err, apperr.TooMany) {
		t.Errorf("CreateDomain(past the total cap) = %v, want TooMany", err)
	}
	if err := db.DeleteDomain(ctx, "d0.example.com", "key_a"); err != nil {
		t.Fatal(err)
	}
	if err := add("key_c", 5); err != nil {
		t.Errorf("CreateDomain(after a delete) = %v", err)
	}
}

// domainConcurrentVerify: owners verifying their claims of one name at
// once leave exactly one verified row; the others get Conflict or
// NotFound (their claim dropped).
func (s suite) domainConcurrentVerify(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	at := time.Now()
	const owners = 6
	for i := range owners {
		if _, err := db.CreateDomain(ctx, shorten.Domain{Name: "race.example.com", Owner: fmt.Sprint("key_", i), Token: "t", CreatedAt: at}, shorten.DomainLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	errs := make([]error, owners)
	var wg sync.WaitGroup
	for i := range owners {
		wg.Go(func() { _, errs[i] = db.VerifyDomain(ctx, "race.example.com", fmt.Sprint("key_", i), at) })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !apperr.Is(err, apperr.Conflict) && !apperr.Is(err, apperr.NotFound):
			t.Errorf("VerifyDomain(key_%d) = %v, want nil, Conflict or NotFound", i, err)
		}
	}
	got, err := db.DomainClaims(ctx, "race.example.com")
	if won != 1 || err != nil || len(got) != 1 || !got[0].Verified() {
		t.Errorf("%d verifications won; DomainClaims = %+v, %v; want one verified row", won, got, err)
	}
}
