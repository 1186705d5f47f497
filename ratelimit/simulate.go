package ratelimit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// SimRequest is one request of a simulation: At is its arrival time on a
// clock that starts at 0.
type SimRequest struct {
	At   time.Duration
	Key  string
	Cost int64
}

// Simulate replays reqs under p on a fresh MemoryStore whose clock starts
// at the Unix epoch, so fixed windows start at multiples of the period from
// 0. Requests are applied in order of At (ties in their given order) and
// their decisions returned in the given order. It touches no other state,
// and agrees exactly with a live limiter given the same times relative to a
// window boundary. Acquired concurrency slots are released only by expiry.
func Simulate(p Policy, reqs []SimRequest) ([]Decision, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
		if reqs[i].At < 0 {
			return nil, fmt.Errorf("request %d: negative time %v", i, reqs[i].At)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(reqs[a].At, reqs[b].At) })
	var now time.Time
	store := NewMemoryStore(MemoryOptions{Now: func() time.Time { return now }, Shards: 1})
	out := make([]Decision, len(reqs))
	for _, i := range order {
		now = time.UnixMicro(int64(reqs[i].At / time.Microsecond))
		d, err := store.Allow(context.Background(), &p, reqs[i].Key, reqs[i].Cost)
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		out[i] = d
	}
	return out, nil
}
