package limits

import (
	"context"
	"log/slog"
)

// ChangeKind says what a Change announces.
type ChangeKind uint8

const (
	// RulesChanged: a policy (Change.Policy) or the blocks (Policy empty)
	// changed; every node reloads its Rules.
	RulesChanged ChangeKind = iota + 1
	// KeyReset: the counters of Change.Key under Change.Policy were reset;
	// every node forgets what it remembers of them.
	KeyReset
)

// Change is what a Service announces (Options.Announce) after it changed
// the rules or reset a key, and what every node, the sender included,
// applies with [Service.Heard] when it hears of it.
type Change struct {
	Kind ChangeKind
	// Policy is the policy changed or whose key was reset; empty when the
	// blocks changed, or when an announcement did not say.
	Policy string
	// Key is the key reset (KeyReset only).
	Key string
}

// Forgetter is implemented by counter stores that remember decisions, as
// [HotKeys] remembers refusals: [Service.Heard] tells them which are no
// longer true. Options.Counters is asked for it once, in NewService.
type Forgetter interface {
	// Forget drops what is remembered of key under the named policy.
	Forget(policy, key string)
	// ForgetPolicy drops what is remembered of every key of the named
	// policy.
	ForgetPolicy(policy string)
}

// Heard applies a change announced by any node, this one included: rules
// changes make the Rules reload soon (Rules.Invalidate) and drop the
// remembered refusals of the policy named, whose limit may have grown; a
// reset drops the key's remembered refusal, so no node goes on refusing a
// key whose counters are gone until its retry time. Heard never blocks: it
// is called from the announcement listener.
//
// A refusal remembered between Heard and the reload it asks for is made
// under the old policy; HotKeys answers it only for that very policy, so
// it is not applied once the new one is in force.
func (s *Service) Heard(c Change) {
	switch c.Kind {
	case RulesChanged:
		s.rules.Invalidate()
		if c.Policy != "" && s.forget != nil {
			s.forget.ForgetPolicy(c.Policy)
		}
	case KeyReset:
		if s.forget != nil {
			s.forget.Forget(c.Policy, c.Key)
		}
	}
}

// tell announces c to the other nodes. A failure is logged: the change is
// made, and the other nodes catch up by themselves (rules at their next
// refresh, remembered refusals at their retry time).
func (s *Service) tell(ctx context.Context, c Change) {
	if s.announce == nil {
		return
	}
	if err := s.announce(context.WithoutCancel(ctx), c); err != nil {
		what := "a rate limit rule change"
		if c.Kind == KeyReset {
			what = "a key reset"
		}
		s.log.Warn("announcing "+what+" failed; other nodes catch up at their next refresh or retry time",
			slog.String("policy", c.Policy), slog.Any("error", err))
	}
}
