package storetest

import (
	"sync"
	"testing"
)

// inboxTokenGenerations pins the inbox token generations: 0 before any
// revocation, one more per revocation (concurrent ones included), per
// user.
func (s suite) inboxTokenGenerations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	if g, err := db.InboxTokenGeneration(ctx, "u1"); err != nil || g != 0 {
		t.Fatalf("InboxTokenGeneration before any revocation = %d, %v; want 0", g, err)
	}
	if g, err := db.RevokeInboxTokens(ctx, "u1", t0); err != nil || g != 1 {
		t.Fatalf("first RevokeInboxTokens = %d, %v; want 1", g, err)
	}
	if g, err := db.RevokeInboxTokens(ctx, "u1", t0); err != nil || g != 2 {
		t.Fatalf("second RevokeInboxTokens = %d, %v; want 2", g, err)
	}
	const n = 8
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := db.RevokeInboxTokens(ctx, "u1", t0); err != nil {
				t.Errorf("concurrent RevokeInboxTokens: %v", err)
			}
		})
	}
	wg.Wait()
	if g, err := db.InboxTokenGeneration(ctx, "u1"); err != nil || g != 2+n {
		t.Errorf("InboxTokenGeneration after %d concurrent revocations = %d, %v; want %d", n, g, err, 2+n)
	}
	if g, err := db.InboxTokenGeneration(ctx, "u2"); err != nil || g != 0 {
		t.Errorf("another user's generation = %d, %v; want 0", g, err)
	}
}
