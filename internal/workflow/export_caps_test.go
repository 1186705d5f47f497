package workflow

import "context"

// CountNow counts the live runs and the users with attributes, as
// RunScheduler does every CountEvery.
func (s *Service) CountNow(ctx context.Context) error {
	if err := s.countRuns(ctx); err != nil {
		return err
	}
	return s.countAttributes(ctx)
}

// LiveRuns is the count MaxLiveRuns is checked against.
func (s *Service) LiveRuns() int64 { return s.live.estimate() }

// SetMaxVersions lowers MaxVersions, so a test need not put a thousand
// versions to reach it.
func (s *Service) SetMaxVersions(n int) { s.maxVersions = n }
