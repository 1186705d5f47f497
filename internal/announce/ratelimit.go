package announce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/sluicehq/sluice/internal/limits"
)

// The rate limit announcement subjects, before the deployment's prefix.
// Rule changes carry {"policy": name} (empty data, as older nodes send,
// and {} mean "the blocks, or something, changed": reload); resets carry
// {"policy": name, "key": key}.
const (
	subjectRulesChanged = "ratelimit.rules.changed"
	subjectKeysReset    = "ratelimit.keys.reset"
)

// changeJSON is a limits.Change on the wire; the subject gives its kind.
type changeJSON struct {
	Policy string `json:"policy,omitempty"`
	Key    string `json:"key,omitempty"`
}

// Ratelimit carries the rate limit service's changes (limits.Change)
// between the nodes: rule changes on one subject, key resets on another.
// It is safe for concurrent use; the zero value is not usable (use
// NewRatelimit).
type Ratelimit struct {
	rules, resets *Bus
}

// NewRatelimit returns the rate limit announcements on nc, naming each
// subject with name (Sluice passes queue.Conn.Name, which adds the
// deployment's prefix).
func NewRatelimit(nc *nats.Conn, name func(string) string) *Ratelimit {
	return &Ratelimit{rules: New(nc, name(subjectRulesChanged)), resets: New(nc, name(subjectKeysReset))}
}

// Announce implements limits.Options.Announce: it returns once the NATS
// server has the announcement, so an API call answers after every node can
// know.
func (a *Ratelimit) Announce(ctx context.Context, c limits.Change) error {
	bus := a.rules
	if c.Kind == limits.KeyReset {
		bus = a.resets
	}
	data, err := json.Marshal(changeJSON{Policy: c.Policy, Key: c.Key})
	if err != nil {
		return fmt.Errorf("encode rate limit announcement: %w", err)
	}
	return bus.Send(ctx, data)
}

// Listen hands every announcement heard, this node's own included, to
// heard (the service's Heard) until stop. An unreadable rule change is
// still a change (reload); an unreadable reset is dropped.
func (a *Ratelimit) Listen(heard func(limits.Change)) (stop func() error, err error) {
	on := func(kind limits.ChangeKind) func(string) {
		return func(data string) {
			var c changeJSON
			if data != "" && json.Unmarshal([]byte(data), &c) != nil {
				c = changeJSON{} // unreadable: still a change, reload
			}
			if kind == limits.KeyReset && (c.Policy == "" || c.Key == "") {
				return
			}
			heard(limits.Change{Kind: kind, Policy: c.Policy, Key: c.Key})
		}
	}
	stopRules, err := a.rules.Listen(on(limits.RulesChanged))
	if err != nil {
		return nil, err
	}
	stopResets, err := a.resets.Listen(on(limits.KeyReset))
	if err != nil {
		_ = stopRules()
		return nil, err
	}
	return func() error { return errors.Join(stopRules(), stopResets()) }, nil
}
