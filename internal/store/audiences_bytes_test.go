package store

import (
	"fmt"
	"testing"
	"time"
)

// TestTopicSubscriptionBytes measures what one topic subscription costs
// in the store (the row and its primary key), the figure
// docs/security.md's bounds table gives for notify.audiences.max_subscriptions.
func TestTopicSubscriptionBytes(t *testing.T) {
	t.Parallel()
	const n = 20_000
	scaleEngines(t, func(t *testing.T, db *DB) {
		size := func() int64 {
			q := `SELECT coalesce(SUM(pgsize), 0) FROM dbstat WHERE name = 'topic_subscribers' OR name IN
				(SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'topic_subscribers')`
			if db.dialect == DialectPostgres {
				if _, err := db.write.ExecContext(t.Context(), `VACUUM ANALYZE topic_subscribers`); err != nil {
					t.Fatal(err)
				}
				q = `SELECT pg_total_relation_size('topic_subscribers')`
			}
			var b int64
			if err := db.write.QueryRowContext(t.Context(), q).Scan(&b); err != nil {
				t.Fatal(err)
			}
			return b
		}
		before := size()
		users := make([]string, 1000)
		for i := range n / 1000 {
			for j := range users {
				users[j] = fmt.Sprintf("user-%08d", i*1000+j) // a 13-byte id
			}
			if _, err := db.Subscribe(t.Context(), "product-updates", users, time.Now(), 10, 1e9); err != nil {
				t.Fatal(err)
			}
		}
		per := float64(size()-before) / n
		t.Logf("%s: %.0f bytes per topic subscription (row and primary key, 13-byte user id, 15-byte topic), %d subscriptions", db.dialect, per, n)
		if per > 200 {
			t.Errorf("%s: %.0f bytes per subscription, over the 200 docs/security.md states", db.dialect, per)
		}
	})
}
