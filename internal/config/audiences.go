package config

import "time"

// Audiences configures topics and broadcasts: each node's sender and the
// caps on what clients store (docs/notifications.md, "Audiences").
type Audiences struct {
	Tick              time.Duration `yaml:"tick" flag:"broadcast-tick" usage:"how often each node's broadcast sender claims the broadcasts that are due"`
	Lease             time.Duration `yaml:"lease" flag:"broadcast-lease" usage:"how long a node's claim on a broadcast lasts without a checkpoint; a broadcast held by a node that died is resumed from its last checkpoint after it"`
	Batch             int           `yaml:"batch" flag:"broadcast-batch" usage:"members a broadcast sender reads, sends and checkpoints at a time"`
	MaxTopics         int           `yaml:"max_topics" flag:"max-topics" usage:"topics the node keeps; subscribing to a new one past it is refused with 429"`
	MaxSubscriptions  int           `yaml:"max_subscriptions" flag:"max-topic-subscriptions" usage:"topic subscriptions the node keeps, every topic's together (about 100 bytes each); a subscribe past it is refused with 429"`
	MaxLiveBroadcasts int           `yaml:"max_live_broadcasts" flag:"max-live-broadcasts" usage:"broadcasts scheduled or sending at once; a new one past it is refused with 429"`
}

func defaultAudiences() Audiences {
	return Audiences{Tick: time.Second, Lease: time.Minute, Batch: 500, MaxTopics: 10_000, MaxSubscriptions: 10_000_000,
		MaxLiveBroadcasts: 1000}
}

// validate reports the audience settings' problems through bad.
func (c Audiences) validate(bad func(flag, format string, args ...any)) {
	if c.Tick < 10*time.Millisecond || c.Tick > time.Minute {
		bad("broadcast-tick", "must be from 10ms to 1m")
	}
	if c.Lease < time.Second || c.Lease > time.Hour {
		bad("broadcast-lease", "must be from 1s to 1h")
	}
	if c.Batch < 1 || c.Batch > 10_000 {
		bad("broadcast-batch", "must be from 1 to 10000")
	}
	if c.MaxTopics < 1 {
		bad("max-topics", "must be at least 1")
	}
	if c.MaxSubscriptions < 1 {
		bad("max-topic-subscriptions", "must be at least 1")
	}
	if c.MaxLiveBroadcasts < 1 {
		bad("max-live-broadcasts", "must be at least 1")
	}
}
