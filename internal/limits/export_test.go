package limits

import "context"

// SyncAllForTest syncs every key of s now, as if its interval had passed
// since its last sync.
func SyncAllForTest(ctx context.Context, s *LocalSync) {
	s.mu.Lock()
	now := s.opts.Now()
	for iv, g := range s.groups {
		g.due = now
		for _, e := range g.keys {
			e.syncedAt = now.Add(-iv)
		}
	}
	s.mu.Unlock()
	s.Sync(ctx)
}
