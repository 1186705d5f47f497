package limits

import "context"

// SyncAllForTest syncs every group of s now, due or not.
func SyncAllForTest(ctx context.Context, s *LocalSync) {
	s.mu.Lock()
	for _, g := range s.groups {
		g.due = s.opts.Now()
	}
	s.mu.Unlock()
	s.Sync(ctx)
}
