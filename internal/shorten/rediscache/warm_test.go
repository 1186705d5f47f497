package rediscache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/storetest"
)

// TestNewLinkRedirectsFromRedis creates a link on one node and redirects
// it on another whose database never saw it: the link was shared when it
// was created, so every node can redirect it from Redis before its first
// visit, as while PostgreSQL is down.
func TestNewLinkRedirectsFromRedis(t *testing.T) {
	t.Parallel()
	shared := New(client(t), fmt.Sprintf("sluice-test:%d:", time.Now().UnixNano()))
	a, b := newNode(t, shared, false, nil), newNode(t, shared, false, nil)
	l, err := a.Create(t.Context(), shorten.CreateRequest{URL: "https://example.com/new"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := b.Resolve(t.Context(), l.Code, "client")
	if err != nil || got.URL != "https://example.com/new" {
		t.Fatalf("Resolve(%s) on a node whose database lacks it = %+v, %v; want the link from Redis", l.Code, got, err)
	}
}

// downStore is a link store that cannot be reached, as during a database
// restart.
type downStore struct{ *store.DB }

func (downStore) LinkByCode(context.Context, string, string) (shorten.Link, error) {
	return shorten.Link{}, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
}

// TestStaleSharedEntryWhileTheStoreFails: a node that never redirected a
// link, asked for it past links.cache_ttl while its database fails, answers
// from the shared entry kept for links.stale_ttl; with its database up, the
// stale shared entry is not trusted.
func TestStaleSharedEntryWhileTheStoreFails(t *testing.T) {
	t.Parallel()
	shared := New(client(t), fmt.Sprintf("sluice-test:%d:", time.Now().UnixNano()))
	later := func() time.Time { return time.Now().Add(time.Minute) }
	l, err := newNode(t, shared, false, nil).Create(t.Context(), shorten.CreateRequest{URL: "https://example.com/kept"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := newNode(t, shared, true, later).Resolve(t.Context(), l.Code, "client")
	if err != nil || got.URL != "https://example.com/kept" {
		t.Errorf("Resolve past the cache TTL while the store fails = %+v, %v; want the stale shared entry", got, err)
	}
	// A database that answers (this one never saw the link) wins over the
	// stale shared entry.
	if got, err := newNode(t, shared, false, later).Resolve(t.Context(), l.Code, "client"); !errors.Is(err, shorten.ErrNotFound) {
		t.Errorf("Resolve past the cache TTL with the store up = %+v, %v; want the store's answer (not found)", got, err)
	}
}

// newNode is a shortener on its own SQLite store (failing every lookup
// when down) sharing the cache shared, on clock now (nil: time.Now).
func newNode(t *testing.T, shared *Cache, down bool, now func() time.Time) *shorten.Service {
	t.Helper()
	db := storetest.SQLite(t)
	codec, err := shorten.NewCodec([]byte("test key"), 7)
	if err != nil {
		t.Fatal(err)
	}
	var st shorten.Store = db
	if down {
		st = downStore{db}
	}
	svc, err := shorten.New(shorten.Options{Store: st, Codec: codec, BaseURL: "https://sho.rt", Shared: shared,
		CacheTTL: 30 * time.Second, StaleTTL: time.Hour, SharedTimeout: 5 * time.Second, Now: now,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
