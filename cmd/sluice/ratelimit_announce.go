package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/internal/announce"
	"github.com/sluicehq/sluice/internal/limits"
)

// The rate limit announcement subjects (before queue.Conn.Name's prefix).
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

// ratelimitAnnouncer carries limits.Change announcements between the
// nodes over NATS.
type ratelimitAnnouncer struct {
	rules, resets *announce.Bus
}

func newRatelimitAnnouncer(n *node) *ratelimitAnnouncer {
	return &ratelimitAnnouncer{
		rules:  announce.New(n.queue.NATS(), n.queue.Name(subjectRulesChanged)),
		resets: announce.New(n.queue.NATS(), n.queue.Name(subjectKeysReset)),
	}
}

// Announce implements limits.Options.Announce: it returns once the NATS
// server has the announcement, so an API call answers after every node can
// know.
func (a *ratelimitAnnouncer) Announce(ctx context.Context, c limits.Change) error {
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

// listen hands every announcement heard to svc.Heard until stop.
func (a *ratelimitAnnouncer) listen(svc *limits.Service) (stop func() error, err error) {
	heard := func(kind limits.ChangeKind) func(string) {
		return func(data string) {
			var c changeJSON
			if data != "" && json.Unmarshal([]byte(data), &c) != nil {
				c = changeJSON{} // unreadable: still a change, reload
			}
			if kind == limits.KeyReset && (c.Policy == "" || c.Key == "") {
				return
			}
			svc.Heard(limits.Change{Kind: kind, Policy: c.Policy, Key: c.Key})
		}
	}
	stopRules, err := a.rules.Listen(heard(limits.RulesChanged))
	if err != nil {
		return nil, err
	}
	stopResets, err := a.resets.Listen(heard(limits.KeyReset))
	if err != nil {
		_ = stopRules()
		return nil, err
	}
	return func() error { return errors.Join(stopRules(), stopResets()) }, nil
}
