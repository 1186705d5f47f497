package config

import "time"

// Inbox configures the in-app inbox's event streams
// (docs/notifications.md, "In-app inbox").
type Inbox struct {
	MaxStreams        int           `yaml:"max_streams" flag:"inbox-max-streams" usage:"inbox event streams open at once on this node; more are refused with 429"`
	MaxStreamsPerUser int           `yaml:"max_streams_per_user" flag:"inbox-max-streams-per-user" usage:"inbox event streams one user may hold open on this node; more are refused with 429"`
	MaxStreamsPerKey  int           `yaml:"max_streams_per_key" flag:"inbox-max-streams-per-key" usage:"inbox event streams one API key (or dashboard session's key) may hold open on this node, over every user; more are refused with 429"`
	Heartbeat         time.Duration `yaml:"heartbeat" flag:"inbox-heartbeat" usage:"how often an idle inbox event stream sends a comment line, so proxies keep it open and clients see it alive"`
}

func defaultInbox() Inbox {
	return Inbox{MaxStreams: 10_000, MaxStreamsPerUser: 5, MaxStreamsPerKey: 1000, Heartbeat: 15 * time.Second}
}

// validate reports the inbox settings' problems through bad.
func (c Inbox) validate(bad func(flag, format string, args ...any)) {
	if c.MaxStreams < 1 {
		bad("inbox-max-streams", "must be at least 1")
	}
	if c.MaxStreamsPerUser < 1 {
		bad("inbox-max-streams-per-user", "must be at least 1")
	}
	if c.MaxStreamsPerKey < 1 {
		bad("inbox-max-streams-per-key", "must be at least 1")
	}
	if c.Heartbeat < time.Second || c.Heartbeat > 5*time.Minute {
		bad("inbox-heartbeat", "must be from 1s to 5m")
	}
}
