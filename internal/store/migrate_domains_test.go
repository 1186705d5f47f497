package store

import (
	"database/sql"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
)

// TestLinksSurviveLinkDomains checks migration 0024 on both engines (on
// SQLite it rebuilds the links table): a link stored before it, with every
// column set, reads the same after it, without a domain; its slug is then
// free on a domain and still taken without one, and its id counter goes on.
func TestLinksSurviveLinkDomains(t *testing.T) {
	t.Parallel()
	onEachEngineThrough(t, "0023_top_links", func(t *testing.T, db *DB, engine string) {
		ctx := t.Context()
		now := time.Now().Truncate(time.Microsecond).UTC()
		next := `UPDATE link_ids SET next = 8 WHERE one = 1` // as the id counter would be after id 7
		if engine == "postgres" {
			next = `SELECT setval('links_id_seq', 7)`
		}
		if _, err := db.exec(ctx, next); err != nil {
			t.Fatal(err)
		}
		if _, err := db.exec(ctx, `INSERT INTO links (id, code, url, owner, notification_id, created_at, expires_at, clicks, bot_hits,
				first_click_at, rules, max_visits, visits, fallback_url, click_ids, conversions)
				VALUES (7, 'spring', 'https://example.com/s', 'key_a', 'ntf_1', ?, ?, 3, 4, ?, ?, 10, 2, 'https://example.com/f', 1, 5)`,
			now.UnixMicro(), now.Add(time.Hour).UnixMicro(), now.UnixMicro(), `[{"name":"ios","if":{"os":["ios"]},"url":"https://example.com/i"}]`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		l, err := db.LinkByCode(ctx, "", "spring")
		want := shorten.Link{ID: 7, Code: "spring", URL: "https://example.com/s", Owner: "key_a", NotificationID: "ntf_1",
			CreatedAt: now, ExpiresAt: now.Add(time.Hour), Clicks: 3, BotHits: 4, FirstClickAt: now,
			LinkExtras: shorten.LinkExtras{MaxVisits: 10, FallbackURL: "https://example.com/f", ClickIDs: true}, Visits: 2, Conversions: 5,
			Rules: []shorten.Rule{{Name: "ios", If: shorten.Conditions{OS: []string{"ios"}}, URL: "https://example.com/i"}}}
		if err != nil || !reflect.DeepEqual(l, want) {
			t.Fatalf("LinkByCode after 0024 = %+v, %v; want %+v", l, err, want)
		}
		if _, err := db.CreateDomain(ctx, shorten.Domain{Name: "go.example.com", CreatedAt: now, VerifiedAt: now}, shorten.DomainLimits{}); err != nil {
			t.Fatal(err)
		}
		out, created, err := db.CreateLinks(ctx, []shorten.NewLink{
			{Code: "spring", URL: "https://example.com/again", CreatedAt: now},
			{Domain: "go.example.com", Code: "spring", URL: "https://example.com/go", CreatedAt: now},
		}, func(id int64) (string, error) { return "x", nil })
		if err != nil || created[0] || !created[1] || out[1].ID <= 7 {
			t.Errorf("CreateLinks after 0024 = %+v %v, %v; want the slug taken without a domain, free on one, with a later id", out, created, err)
		}
		if err := db.DeleteLink(ctx, "go.example.com", "spring"); err != nil {
			t.Error(err)
		}
		if _, err := db.LinkByCode(ctx, "go.example.com", "spring"); !apperr.Is(err, apperr.NotFound) {
			t.Errorf("LinkByCode(deleted) = %v", err)
		}
	})
}

// TestPostgresDeleteDomainWaitsForLinks: a DeleteDomain that comes while
// a link creation holds the domain (lockDomains' FOR SHARE) waits for it,
// then finds its link and keeps the domain, so no link is ever left on a
// removed domain.
func TestPostgresDeleteDomainWaitsForLinks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := enginetest.PostgresSchema(t, enginetest.PostgresURL(t))
	db := openMigrated(t, Options{URL: u, MaxOpenConns: 2})
	if _, err := db.CreateDomain(ctx, shorten.Domain{Name: "go.example.com", CreatedAt: time.Now(), VerifiedAt: time.Now()}, shorten.DomainLimits{}); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, q := range []string{`SELECT domain FROM domains WHERE domain = 'go.example.com' FOR SHARE`,
		`INSERT INTO links (id, domain, code, url, owner, created_at) VALUES (1000, 'go.example.com', 'held', 'https://example.com/', '', 0)`} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- db.DeleteDomain(ctx, "go.example.com", "") }()
	waitForLockWait(t, u, 0, done, `a.query LIKE 'DELETE FROM domains%'`)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !apperr.Is(err, apperr.Conflict) {
			t.Errorf("DeleteDomain while a link was being created on it = %v, want Conflict", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("DeleteDomain did not return within 30s of the link's commit")
	}
	if ds, err := db.DomainClaims(ctx, "go.example.com"); err != nil || len(ds) != 1 {
		t.Errorf("the domain after the refused delete: %+v, %v", ds, err)
	}
}

// TestDomainsSurviveDomainClaims checks migration 0029 on both engines (on
// SQLite it rebuilds the domains table): a domain registered before it
// reads the same after it, verified since its registration, with a token
// of its own; its links stay on it, and another owner's claim is refused.
func TestDomainsSurviveDomainClaims(t *testing.T) {
	t.Parallel()
	onEachEngineThrough(t, "0028_rollups_from_threshold", func(t *testing.T, db *DB, engine string) {
		ctx := t.Context()
		now := time.Now().Truncate(time.Microsecond).UTC()
		for _, q := range []string{
			`INSERT INTO domains (domain, owner, fallback_url, created_at) VALUES ('go.example.com', 'key_a', 'https://example.com/f', ?)`,
			`INSERT INTO domains (domain, owner, fallback_url, created_at) VALUES ('x.example.org', 'key_b', '', ?)`,
		} {
			if _, err := db.exec(ctx, q, now.UnixMicro()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.exec(ctx, `INSERT INTO links (id, domain, code, url, owner, created_at) VALUES (7, 'go.example.com', 'spring', 'https://example.com/s', 'key_a', ?)`, now.UnixMicro()); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		all, err := db.Domains(ctx, 10)
		if err != nil || len(all) != 2 {
			t.Fatalf("Domains after 0029 = %+v, %v", all, err)
		}
		want := shorten.Domain{Name: "go.example.com", Owner: "key_a", FallbackURL: "https://example.com/f", CreatedAt: now, VerifiedAt: now, Token: all[0].Token}
		if all[0] != want || len(all[0].Token) != 40 || all[0].Token == all[1].Token || !all[1].Verified() {
			t.Errorf("Domains after 0029 = %+v; want %+v first, each verified with a 40-character token of its own", all, want)
		}
		if l, err := db.LinkByCode(ctx, "go.example.com", "spring"); err != nil || l.ID != 7 {
			t.Errorf("LinkByCode after 0029 = %+v, %v", l, err)
		}
		if _, err := db.CreateDomain(ctx, shorten.Domain{Name: "go.example.com", Owner: "key_b", Token: "t", CreatedAt: now}, shorten.DomainLimits{}); !apperr.Is(err, apperr.Conflict) {
			t.Errorf("a claim of a domain registered before 0029 = %v, want Conflict", err)
		}
		if err := db.DeleteDomain(ctx, "go.example.com", "key_a"); !apperr.Is(err, apperr.Conflict) {
			t.Errorf("DeleteDomain with links after 0029 = %v, want Conflict", err)
		}
	})
}
