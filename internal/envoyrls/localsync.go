package envoyrls

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// Local sync. A rule may say sync: local (and sync_interval, 50ms when
// absent), as a named HTTP policy may: each Sluice node then decides the
// rule's counters from its local share of what the shared store has left
// and syncs with it every interval (the node's LocalSync store does it,
// asking SyncInterval by policy name). Checks cost no round trip to Redis;
// the price is the accuracy described in docs/envoy.md, "Local sync".

// PolicyPrefix begins the policy name of every Envoy rule's counters.
const PolicyPrefix = "envoy:"

const (
	defaultSyncInterval = 50 * time.Millisecond
	minSyncInterval     = time.Millisecond
	maxSyncInterval     = time.Minute
)

// sync parses a rate_limit's sync and sync_interval: the interval of a
// sync: local rule, or 0.
func (p *parser) sync(f map[string]*yaml.Node, path string) (time.Duration, error) {
	mode, err := p.str(f["sync"], path+".sync")
	if err != nil {
		return 0, err
	}
	every, err := p.str(f["sync_interval"], path+".sync_interval")
	if err != nil {
		return 0, err
	}
	switch mode {
	case "":
		if every != "" {
			return 0, p.errorf(f["sync_interval"], path+".sync_interval", "applies only to sync: local")
		}
		return 0, nil
	case "local":
	default:
		return 0, p.errorf(f["sync"], path+".sync", "must be local or absent, not %q", mode)
	}
	if every == "" {
		return defaultSyncInterval, nil
	}
	d, err := time.ParseDuration(every)
	if err != nil || d < minSyncInterval || d > maxSyncInterval || d%time.Millisecond != 0 {
		return 0, p.errorf(f["sync_interval"], path+".sync_interval", "must be a whole number of milliseconds between 1ms and 1m, not %q", every)
	}
	return d, nil
}

// syncIntervals maps the policy name of every sync: local rule of c to its
// interval (nil when there is none).
func (c *Config) syncIntervals() map[string]time.Duration {
	var out map[string]time.Duration
	var walk func(n *node)
	walk = func(n *node) {
		if n == nil {
			return
		}
		if r := n.rule; r != nil && r.syncEvery > 0 {
			if out == nil {
				out = map[string]time.Duration{}
			}
			out[r.policy.Name] = r.syncEvery
		}
		for _, c := range n.exact {
			walk(c)
		}
		for _, w := range n.wildcards {
			walk(w.node)
		}
		for _, c := range n.bare {
			walk(c)
		}
	}
	for _, d := range c.domains {
		walk(&d.root)
	}
	return out
}

// SyncInterval returns the sync interval of the rule in force whose
// counters use the named policy when it says sync: local, else 0. The
// node's LocalSync store asks it for every check of an "envoy:" policy.
func (s *Server) SyncInterval(policy string) time.Duration {
	return s.state.Load().sync[policy]
}
