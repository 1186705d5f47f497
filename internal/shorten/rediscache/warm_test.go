package rediscache

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/internal/store"
)

// TestNewLinkRedirectsFromRedis creates a link on one node and redirects
// it on another whose database never saw it: the link was shared when it
// was created, so every node can redirect it from Redis before its first
// visit, as while PostgreSQL is down.
func TestNewLinkRedirectsFromRedis(t *testing.T) {
	t.Parallel()
	shared := New(client(t), fmt.Sprintf("sluice-test:%d:", time.Now().UnixNano()))
	node := func() *shorten.Service {
		db, err := store.Open(t.Context(), store.Options{DataDir: filepath.Join(t.TempDir(), "data")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.Migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		codec, err := shorten.NewCodec([]byte("test key"), 7)
		if err != nil {
			t.Fatal(err)
		}
		svc, err := shorten.New(shorten.Options{Store: db, Codec: codec, BaseURL: "https://sho.rt",
			Shared: shared, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	a, b := node(), node()
	l, err := a.Create(t.Context(), shorten.CreateRequest{URL: "https://example.com/new"})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := b.Resolve(t.Context(), l.Code, "client")
	if err != nil || got.URL != "https://example.com/new" {
		t.Fatalf("Resolve(%s) on a node whose database lacks it = %+v, %v; want the link from Redis", l.Code, got, err)
	}
}
