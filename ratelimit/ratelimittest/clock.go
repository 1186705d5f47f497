// Package ratelimittest is the conformance suite every ratelimit.Store must
// pass, run by the memory store's tests and by redisstore's against a real
// Redis: one set of behaviours, so every algorithm acts the same in every
// store.
//
// The suite drives time through a Clock it hands to the store under test.
// The memory store reads it directly; the Redis store sends it to its
// script in place of the server's TIME (an option meant only for tests:
// production always uses the Redis clock, shared by every node). Driving
// one clock in both is what lets the same tables, with exact RetryAfter
// values, run unchanged on both stores; relative timing against the real
// Redis clock would need sleeps and tolerances.
package ratelimittest

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when told. It is safe for concurrent
// use. The zero value reads the Unix epoch. It is the module's one test
// clock: tests of every package pass its Now wherever code under test
// takes a Now func() time.Time.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		return time.Unix(0, 0)
	}
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	if c.t.IsZero() {
		c.t = time.Unix(0, 0)
	}
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
