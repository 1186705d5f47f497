package store

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
)

// TestBlocksSurviveBlockDomain checks migration 0009 on both engines: a
// block stored before it is the same block, without domain, after it, and
// the same key and policy may then be blocked once more in a domain.
func TestBlocksSurviveBlockDomain(t *testing.T) {
	t.Parallel()
	onEachEngineThrough(t, "0008_one_secret_table", func(t *testing.T, db *DB, _ string) {
		ctx := t.Context()
		now := time.Now().Truncate(time.Microsecond)
		const key = "remote_address=203.0.113.9"
		if _, err := db.exec(ctx, `INSERT INTO ratelimit_blocks (key, policy, reason, created_at, expires_at)
				VALUES (?, '', 'before', ?, ?)`, key, now.UnixMicro(), now.Add(time.Hour).UnixMicro()); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		if err := db.PutBlock(ctx, limits.Block{Key: key, Domain: "edge", Reason: "after", CreatedAt: now,
			ExpiresAt: now.Add(time.Minute)}); err != nil {
			t.Fatalf("PutBlock in domain edge: %v", err)
		}
		bs, err := db.ListBlocks(ctx, now)
		if err != nil || len(bs) != 2 || bs[0].Domain != "" || bs[0].Reason != "before" || !bs[0].ExpiresAt.Equal(now.Add(time.Hour)) ||
			bs[1].Domain != "edge" || bs[1].Reason != "after" {
			t.Errorf("ListBlocks after 0009 = %+v, %v; want the old block without domain, then the new one in edge", bs, err)
		}
	})
}
