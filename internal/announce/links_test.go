package announce_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/announce"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/queue"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// linkNode is one in-process shortener with its own store and NATS connections.
type linkNode struct {
	svc *shorten.Service
	q   *queue.Conn
	log *enginetest.LogBuffer
}

// startLinkNode opens its own connections to the shared database file and NATS
// server. A node that does not listen still announces its deletes.
func startLinkNode(t *testing.T, dbPath, natsURL, prefix string, listen bool) *linkNode {
	t.Helper()
	db, q, codec := linkDeps(t, dbPath, natsURL, prefix)
	bus := announce.New(q.NATS(), q.Name("links.deleted"))
	n := &linkNode{q: q, log: &enginetest.LogBuffer{}}
	// A cache TTL far longer than the test: only the announcement can
	// make another node stop redirecting a deleted link in time.
	var err error
	n.svc, err = shorten.New(shorten.Options{Store: db, Codec: codec, BaseURL: "https://sho.rt",
		Targets:  shorten.TargetPolicy{OwnHosts: []string{"sho.rt"}},
		CacheTTL: time.Hour, NegativeTTL: time.Hour, Announce: bus.Post,
		Logger: slog.New(slog.NewTextHandler(n.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if listen {
		stop, err := bus.Listen(n.svc.Forget)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stop() })
	}
	return n
}

// linkDeps opens a node's own connections to the shared database file and
// NATS server, and the codec every node shares.
func linkDeps(t *testing.T, dbPath, natsURL, prefix string) (*store.DB, *queue.Conn, *shorten.Codec) {
	t.Helper()
	db, q := nodeConns(t, dbPath, natsURL, prefix)
	codec, err := shorten.NewCodec([]byte("test key"), 7)
	if err != nil {
		t.Fatal(err)
	}
	return db, q, codec
}

// nodeConns opens a node's own connections to the database file at dbPath
// (migrated) and to the NATS server at natsURL, streams under prefix.
func nodeConns(t *testing.T, dbPath, natsURL, prefix string) (*store.DB, *queue.Conn) {
	t.Helper()
	ctx := t.Context()
	db, err := store.Open(ctx, store.Options{URL: "sqlite:" + dbPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := queue.Open(ctx, queue.Options{URL: natsURL, StreamPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return db, q
}

// threeLinkNodes starts three shorteners on one database and one NATS
// server of the test's own: a and b listen for announcements, c does not.
func threeLinkNodes(t *testing.T) (a, b, c *linkNode) {
	t.Helper()
	nats := enginetest.StartNATS(t)
	dbPath := filepath.Join(t.TempDir(), "sluice.db")
	prefix := testPrefix()
	return startLinkNode(t, dbPath, nats.URL(), prefix, true), startLinkNode(t, dbPath, nats.URL(), prefix, true),
		startLinkNode(t, dbPath, nats.URL(), prefix, false)
}

func testPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "T" + hex.EncodeToString(b[:]) + "_"
}

// TestDeleteReachesTheOtherNode: three shorteners share one database and
// one NATS server, each caching links for an hour. A link cached on B and
// C and deleted on A stops redirecting on B well within a second; C, which
// does not listen, still redirects it from its cache, so B's answer can
// only have come from the announcement.
func TestDeleteReachesTheOtherNode(t *testing.T) {
	t.Parallel()
	a, b, c := threeLinkNodes(t)
	ctx := t.Context()

	owner := shorten.Caller{ID: "key_a"}
	l, err := a.svc.Create(ctx, shorten.CreateRequest{URL: "https://example.com/gone", Owner: owner.ID})
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]*linkNode{"A": a, "B": b, "C": c} {
		if tg, err := n.svc.Resolve(ctx, l.Code, "client"); err != nil || tg.URL != l.URL {
			t.Fatalf("Resolve on %s before the delete = %+v, %v", name, tg, err)
		}
	}

	if err := a.svc.Delete(ctx, owner, l.Code); err != nil {
		t.Fatalf("Delete on A: %v", err)
	}
	took := enginetest.Eventually(t, 20*time.Second, "B stops redirecting the link deleted on A", func() bool {
		_, err := b.svc.Resolve(ctx, l.Code, "client")
		return errors.Is(err, shorten.ErrNotFound)
	})
	t.Logf("link deleted on A stopped redirecting on B after %v", took)
	if _, err := a.svc.Resolve(ctx, l.Code, "client"); !errors.Is(err, shorten.ErrNotFound) {
		t.Errorf("Resolve on A after its own delete = %v, want ErrNotFound", err)
	}
	if tg, err := c.svc.Resolve(ctx, l.Code, "client"); err != nil || tg.URL != l.URL {
		t.Errorf("Resolve on C (not listening) = %+v, %v; want the cached link (else the test proves nothing)", tg, err)
	}
	if log := a.log.String(); log != "" {
		t.Errorf("A logged while NATS was up:\n%s", log)
	}

	// With A's NATS connection gone, a delete still succeeds; the failed
	// announcement is logged and B is left to its TTL.
	l2, err := a.svc.Create(ctx, shorten.CreateRequest{URL: "https://example.com/later", Owner: owner.ID})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.svc.Delete(ctx, owner, l2.Code); err != nil {
		t.Errorf("Delete on A without NATS = %v, want success", err)
	}
	if log := a.log.String(); !strings.Contains(log, "announcing a deleted or changed link failed") {
		t.Errorf("A's log after a delete without NATS = %q, want the failed announcement", log)
	}
}

// downLinks is a link store whose lookups fail, as while the database
// restarts.
type downLinks struct{ *store.DB }

func (downLinks) LinkByCode(context.Context, string, string) (shorten.Link, error) {
	return shorten.Link{}, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
}

// TestCreateReachesTheOtherNode: a link created on A is announced, and B,
// whose store cannot answer and which has no shared cache, redirects it
// from what it heard.
func TestCreateReachesTheOtherNode(t *testing.T) {
	t.Parallel()
	nats := enginetest.StartNATS(t)
	dbPath := filepath.Join(t.TempDir(), "sluice.db")
	prefix := testPrefix()
	node := func(down bool) *shorten.Service { return announcingNode(t, dbPath, nats.URL(), prefix, down) }
	a, b := node(false), node(true)
	l, err := a.Create(t.Context(), shorten.CreateRequest{URL: "https://example.com/new-link"})
	if err != nil {
		t.Fatal(err)
	}
	took := enginetest.Eventually(t, 5*time.Second, "B redirects the link created on A", func() bool {
		tg, err := b.Resolve(t.Context(), l.Code, "client")
		return err == nil && tg.URL == l.URL
	})
	t.Logf("link created on A redirected on B (store down) after %v", took)
}

// TestDomainLinkReachesTheOtherNode: a link on a custom domain created on
// A is announced under its domain's key; B, whose link reads fail,
// redirects it on the domain's host only, and its code without a domain
// stays unknown there.
func TestDomainLinkReachesTheOtherNode(t *testing.T) {
	t.Parallel()
	nats := enginetest.StartNATS(t)
	dbPath := filepath.Join(t.TempDir(), "sluice.db")
	prefix := testPrefix()
	a, b := announcingNode(t, dbPath, nats.URL(), prefix, false), announcingNode(t, dbPath, nats.URL(), prefix, true)
	admin := shorten.Caller{Admin: true}
	if _, err := a.CreateDomain(t.Context(), admin, "go.example.com", ""); err != nil {
		t.Fatal(err)
	}
	l, err := a.Create(t.Context(), shorten.CreateRequest{URL: "https://example.com/on-go", Slug: "spring", Domain: "go.example.com", Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 5*time.Second, "B redirects the domain's link created on A", func() bool {
		tg, err := b.ResolveHost(t.Context(), "go.example.com", "spring", "client")
		return err == nil && tg.URL == l.URL
	})
	if tg, err := b.ResolveHost(t.Context(), "sho.rt", "spring", "client"); err == nil {
		t.Errorf("B redirects spring without a domain to %q; want no link", tg.URL)
	}
	code, cl, err := announce.DecodeLinkCreated(announce.EncodeLinkCreated(shorten.Key("go.example.com", "spring"), shorten.CachedLink{ID: 3, URL: "https://e.x/"}))
	if err != nil || code != "go.example.com/spring" || cl.ID != 3 {
		t.Errorf("round trip of a domain link = %q %+v, %v", code, cl, err)
	}
}

func TestLinkCreatedEncoding(t *testing.T) {
	t.Parallel()
	exp := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	for _, l := range []shorten.CachedLink{{ID: 7, URL: "https://example.com/a b"}, {ID: 9, URL: "https://e.x/", ExpiresAt: exp},
		{ID: 10, URL: "https://e.x/r", Rules: `[{"if":{"os":["ios"]},"url":"https://e.x/ios"}]`}} {
		code, got, err := announce.DecodeLinkCreated(announce.EncodeLinkCreated("abc1234", l))
		if err != nil || code != "abc1234" || got != l {
			t.Errorf("round trip of %+v = %q %+v, %v", l, code, got, err)
		}
	}
	for _, bad := range []string{"", "abc 1 0", "abc x 0 https://e", "abc 1 y https://e", " 1 0 https://e",
		"abc r:1 0 https://e", "abc r:1 0 https://e\n", "abc r:1 0 \n[]"} {
		if _, _, err := announce.DecodeLinkCreated(bad); err == nil {
			t.Errorf("DecodeLinkCreated(%q) succeeded", bad)
		}
	}
}

// announcingNode is a shortener on the database at dbPath that announces
// the links it creates on NATS and learns those the others announce; with
// down, its store answers no link reads.
func announcingNode(t *testing.T, dbPath, natsURL, prefix string, down bool) *shorten.Service {
	t.Helper()
	db, q, codec := linkDeps(t, dbPath, natsURL, prefix)
	bus := announce.New(q.NATS(), q.Name(announce.SubjectLinksCreated))
	var st shorten.Store = db
	if down {
		st = downLinks{db}
	}
	svc, err := shorten.New(shorten.Options{Store: st, Codec: codec, BaseURL: "https://sho.rt",
		Targets: shorten.TargetPolicy{OwnHosts: []string{"sho.rt"}}, CacheTTL: time.Hour,
		AnnounceCreated: func(code string, l shorten.CachedLink) error { return bus.Post(announce.EncodeLinkCreated(code, l)) },
		Logger:          slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := bus.Listen(func(data string) {
		if code, l, err := announce.DecodeLinkCreated(data); err == nil {
			svc.Learn(code, l)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return svc
}

// TestVisitLimitedRulesReachTheOtherNode: a link with a visit limit is
// never announced whole, so new rules reach the other nodes as a change
// announcement. Three shorteners share one database and one NATS server,
// caching links for an hour; rules set on A apply on B well within a
// second, while C, which does not listen, keeps its cached entry without
// them (so B's answer can only have come from the announcement).
func TestVisitLimitedRulesReachTheOtherNode(t *testing.T) {
	t.Parallel()
	a, b, c := threeLinkNodes(t)
	ctx := t.Context()

	owner := shorten.Caller{ID: "key_a"}
	l, err := a.svc.Create(ctx, shorten.CreateRequest{URL: "https://example.com/once", Owner: owner.ID,
		LinkExtras: shorten.LinkExtras{MaxVisits: 100}})
	if err != nil {
		t.Fatal(err)
	}
	german := shorten.Visit{AcceptLanguage: "de"}
	target := func(n *linkNode) (shorten.Target, error) {
		tg, err := n.svc.Resolve(ctx, l.Code, "client")
		return n.svc.Choose(tg, german), err
	}
	for name, n := range map[string]*linkNode{"B": b, "C": c} {
		if tg, err := target(n); err != nil || tg.URL != l.URL {
			t.Fatalf("Resolve on %s before the rules = %+v, %v", name, tg, err)
		}
	}
	rules := []shorten.Rule{{Name: "de", If: shorten.Conditions{Language: []string{"de"}}, URL: "https://example.de/"}}
	if _, err := a.svc.SetRules(ctx, owner, l.Code, rules); err != nil {
		t.Fatalf("SetRules on A: %v", err)
	}
	took := enginetest.Eventually(t, 20*time.Second, "B applies the rules set on A", func() bool {
		tg, err := target(b)
		return err == nil && tg.Rule == "de"
	})
	t.Logf("rules set on A applied on B after %v", took)
	if tg, err := target(c); err != nil || tg.Rule == "de" {
		t.Errorf("C (not listening) = %+v, %v; want its cached entry without the rules (else the test proves nothing)", tg, err)
	}
}
