package workflow

import (
	"context"
	"encoding/json"
)

// ParseDefinition is PutWorkflow's parser and validator, for the tests.
func ParseDefinition(ctx context.Context, key string, body json.RawMessage, templates Templates) (Workflow, error) {
	return parseDefinition(ctx, key, body, templates)
}

// RunDue claims and advances the due runs until none are left, on the
// test's goroutine, and returns how many it advanced.
func (s *Service) RunDue(ctx context.Context) (int, error) {
	n := 0
	for {
		runs, err := s.opts.Store.ClaimDue(ctx, s.opts.Now(), s.opts.Lease, s.opts.Batch)
		if err != nil || len(runs) == 0 {
			return n, err
		}
		for _, r := range runs {
			s.advance(ctx, r)
			n++
		}
	}
}

// Advance advances r as a claim of it would.
func (s *Service) Advance(ctx context.Context, r Run) { s.advance(ctx, r) }

// SetMaxRunSteps lowers the step guard, so a test need not run a
// thousand steps to reach it.
func (s *Service) SetMaxRunSteps(n int) { s.maxRunSteps = n }
