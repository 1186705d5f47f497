package limits

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/ratelimit"
)

// MaxChecks bounds the checks of one multi-key request.
const MaxChecks = 100

// Who decided a check, the values of Result.DecidedBy.
const (
	ByRule  = "rule"
	ByBlock = "block"
)

// Options configures NewService.
type Options struct {
	// Rules is the rules cache. Required.
	Rules *Rules
	// Counters keeps rate limit state: a MemoryStore, or the Redis store
	// wrapped in Failover (and HotKeys). Required. When it implements
	// [Forgetter], Heard tells it about resets and policy changes.
	Counters ratelimit.Store
	// Announce tells every node, this one included, about a change: after
	// a rule change this node has already reloaded its rules, after a
	// reset the store no longer holds the key's counters. Each node
	// applies it with Heard. If nil, other nodes notice rule changes at
	// their next periodic refresh and resets at their remembered refusals'
	// retry time.
	Announce func(ctx context.Context, c Change) error
	// Metrics records decisions. If nil, nothing is recorded.
	Metrics *Metrics
	// Logger receives shadow-mode refusals (at most one line per policy
	// every 10 s) and announcement failures. If nil, nothing is logged.
	Logger *slog.Logger
	// Now is the clock blocks are checked against. If nil, time.Now.
	Now func() time.Time
	// MaxHolds and MaxOwnerHolds bound the unsettled reservations of one
	// key and of one API key (ratelimit.UsageOptions); 0 is
	// ratelimit.DefaultMaxHolds and DefaultMaxOwnerHolds.
	MaxHolds, MaxOwnerHolds int
	// MaxBlocks bounds the emergency blocks in force at once, which every
	// node keeps in memory; 0 is DefaultMaxBlocks.
	MaxBlocks int
}

// DefaultMaxBlocks is Options.MaxBlocks when it is 0.
const DefaultMaxBlocks = 10_000

// Service makes rate limit decisions against the rules and manages the
// rules. It is safe for concurrent use; build it with NewService.
type Service struct {
	rules    *Rules
	counters ratelimit.Store
	announce func(ctx context.Context, c Change) error
	forget   Forgetter // nil: Counters remember nothing
	metrics  *Metrics
	log      *slog.Logger
	now      func() time.Time
	logLimit *ratelimit.MemoryStore

	maxHolds, maxOwnerHolds int
	maxBlocks               int
}

// NewService returns a Service.
func NewService(opts Options) (*Service, error) {
	if opts.Rules == nil || opts.Counters == nil {
		return nil, errors.New("limits: Rules and Counters are required")
	}
	s := &Service{rules: opts.Rules, counters: opts.Counters, announce: opts.Announce,
		metrics: opts.Metrics, log: opts.Logger, now: opts.Now, maxHolds: opts.MaxHolds, maxOwnerHolds: opts.MaxOwnerHolds,
		maxBlocks: cmp.Or(opts.MaxBlocks, DefaultMaxBlocks)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.forget, _ = opts.Counters.(Forgetter)
	s.logLimit = ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: s.now, Shards: 1})
	return s, nil
}

// Rules returns the service's rules cache.
func (s *Service) Rules() *Rules { return s.rules }

// CheckRequest is one (policy, key, cost) of a check.
type CheckRequest struct {
	Policy string
	Key    string
	Cost   int64
}

// Result is the decision on one CheckRequest.
type Result struct {
	Policy string
	Key    string
	Verdict
	// DecidedBy is ByBlock when an emergency block refused the key, else
	// ByRule.
	DecidedBy string
	// Block is the block that decided, when DecidedBy is ByBlock.
	Block *Block
	Mode  Mode
	// Quota and Window are the policy's Limit and Period, for the
	// RateLimit-Policy header.
	Quota  int64
	Window time.Duration
}

// logShadow admits one log line per policy every 10 s.
var logShadow = ratelimit.Policy{Name: "log", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: 10 * time.Second}

// Check decides reqs together: every check consumes only if every
// non-shadow check allows, atomically in the store. allowed is the overall
// answer; results has one Result per request, in order, each saying whether
// its own check passed. Invalid requests fail with apperr Invalid (400) or
// NotFound (404, an unknown policy) and charge nothing.
func (s *Service) Check(ctx context.Context, reqs []CheckRequest) (allowed bool, results []Result, err error) {
	start := s.now()
	entries, err := s.resolve(reqs)
	if err != nil {
		return false, nil, err
	}
	results = make([]Result, len(reqs))
	for i, e := range entries {
		results[i] = Result{Policy: e.Name, Key: reqs[i].Key, DecidedBy: ByRule, Mode: e.Mode, Quota: e.Limit, Window: time.Duration(e.Period)}
	}
	allowed, err = s.decide(ctx, reqs, entries, results, start)
	if err != nil {
		return false, nil, err
	}
	label := "multi"
	if len(reqs) == 1 {
		label = reqs[0].Policy
	}
	s.metrics.took(label, s.now().Sub(start))
	return allowed, results, nil
}

// resolve validates reqs and finds their policies.
func (s *Service) resolve(reqs []CheckRequest) ([]*entry, error) {
	if len(reqs) == 0 {
		return nil, apperr.New(apperr.Invalid, "at least one check is required")
	}
	if len(reqs) > MaxChecks {
		return nil, apperr.New(apperr.Invalid, "at most %d checks per request", MaxChecks)
	}
	field := func(i int, name string) string {
		if len(reqs) == 1 {
			return name
		}
		return fmt.Sprintf("checks[%d].%s", i, name)
	}
	var fe []apperr.FieldError
	entries := make([]*entry, len(reqs))
	var missing []string
	for i, r := range reqs {
		switch {
		case r.Key == "":
			fe = append(fe, apperr.FieldError{Field: field(i, "key"), Detail: "is required"})
		case len(r.Key) > MaxKeyBytes:
			fe = append(fe, apperr.FieldError{Field: field(i, "key"), Detail: "must be at most 1024 bytes"})
		}
		e, ok := s.rules.lookup(r.Policy)
		switch {
		case r.Policy == "":
			fe = append(fe, apperr.FieldError{Field: field(i, "policy"), Detail: "is required"})
		case !ok:
			missing = append(missing, r.Policy)
		}
		entries[i] = e
		switch {
		case r.Cost < 1:
			fe = append(fe, apperr.FieldError{Field: field(i, "cost"), Detail: "must be at least 1"})
		case ok && r.Cost > e.eff.MaxCost():
			fe = append(fe, apperr.FieldError{Field: field(i, "cost"),
				Detail: fmt.Sprintf("exceeds what policy %q can ever admit (%d)", r.Policy, e.eff.MaxCost())})
		}
		for j := range i {
			if reqs[j].Policy == r.Policy && reqs[j].Key == r.Key {
				fe = append(fe, apperr.FieldError{Field: field(i, "key"), Detail: "the same policy and key appear twice"})
			}
		}
	}
	if err := apperr.Fields(apperr.Invalid, "the check is invalid", fe); err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, apperr.New(apperr.NotFound, "no such policy: %s", strings.Join(missing, ", "))
	}
	return entries, nil
}

// decide fills results and returns the overall answer.
func (s *Service) decide(ctx context.Context, reqs []CheckRequest, entries []*entry, results []Result, now time.Time) (bool, error) {
	if s.applyBlocks(reqs, entries, results, now) {
		s.peekRest(ctx, reqs, entries, results)
		for i := range results {
			s.record(&results[i], false)
		}
		return false, nil
	}
	var hard, shadow []int
	for i, e := range entries {
		if e.Mode == Shadow {
			shadow = append(shadow, i)
		} else {
			hard = append(hard, i)
		}
	}
	allowed := true
	switch len(hard) {
	case 0:
	case 1:
		i := hard[0]
		d, err := s.counters.Allow(ctx, &entries[i].eff, reqs[i].Key, reqs[i].Cost)
		if err != nil {
			return false, storeError(err)
		}
		results[i].Verdict = entries[i].apply(d)
		allowed = d.Allowed
	default:
		checks := make([]ratelimit.Check, len(hard))
		for k, i := range hard {
			checks[k] = ratelimit.Check{Policy: &entries[i].eff, Key: reqs[i].Key, Cost: reqs[i].Cost}
		}
		ds, err := s.counters.AllowMulti(ctx, checks)
		if err != nil {
			return false, storeError(err)
		}
		for k, i := range hard {
			results[i].Verdict = entries[i].apply(ds[k])
			allowed = allowed && ds[k].Allowed
		}
	}
	if !allowed {
		s.peekRest(ctx, reqs, entries, results) // shadow checks are not charged for a refused request
	} else {
		for _, i := range shadow {
			d, err := s.counters.Allow(ctx, &entries[i].eff, reqs[i].Key, reqs[i].Cost)
			if err != nil {
				return false, storeError(err)
			}
			results[i].Verdict = entries[i].apply(d)
		}
	}
	for i := range results {
		s.record(&results[i], allowed)
	}
	return allowed, nil
}

// applyBlocks marks the blocked checks refused and reports whether any was.
func (s *Service) applyBlocks(reqs []CheckRequest, entries []*entry, results []Result, now time.Time) bool {
	any := false
	for i, r := range reqs {
		b, ok := s.rules.block(r.Key, r.Policy, now)
		if !ok {
			continue
		}
		any = true
		left := b.ExpiresAt.Sub(now)
		results[i].Verdict = Verdict{Decision: ratelimit.Decision{Allowed: false, Limit: entries[i].Capacity(),
			RetryAfter: left, ResetAfter: left}}
		results[i].DecidedBy, results[i].Block = ByBlock, &b
	}
	return any
}

// peekRest fills the results not yet decided (Limit 0) with the keys'
// current state, for a request refused before they were charged.
func (s *Service) peekRest(ctx context.Context, reqs []CheckRequest, entries []*entry, results []Result) {
	for i := range results {
		if results[i].DecidedBy == ByBlock || results[i].Limit != 0 {
			continue
		}
		d, err := s.counters.Peek(ctx, &entries[i].eff, reqs[i].Key)
		if err != nil {
			d = ratelimit.Decision{Allowed: true, Limit: entries[i].eff.Capacity(), Remaining: entries[i].eff.Capacity()}
		}
		results[i].Verdict = entries[i].apply(d)
	}
}

// record counts a decided check and logs shadow refusals sparingly.
func (s *Service) record(r *Result, overall bool) {
	switch {
	case r.DecidedBy == ByBlock:
		s.metrics.decided(r.Policy, resultBlocked)
	case r.Allowed && overall:
		s.metrics.decided(r.Policy, resultAllowed)
	default:
		s.metrics.decided(r.Policy, resultRefused)
	}
	if !r.WouldRefuse || !overall {
		return
	}
	s.metrics.wouldHaveRefused(r.Policy, r.Mode)
	if r.Mode == Shadow {
		if d, err := s.logLimit.Allow(context.Background(), &logShadow, r.Policy, 1); err == nil && d.Allowed {
			s.log.Info("shadow policy would have refused a request (logged at most every 10s per policy)",
				slog.String("policy", r.Policy), slog.String("key", r.Key))
		}
	}
}

// storeError maps a store failure for the edge. Failover keeps a Redis
// outage from getting here; what does is a bug or a refused argument.
func storeError(err error) error {
	switch {
	case errors.Is(err, ratelimit.ErrInvalidCost), errors.Is(err, ratelimit.ErrCostExceedsLimit),
		errors.Is(err, ratelimit.ErrDuplicateCheck), errors.Is(err, ratelimit.ErrInvalidPolicy):
		return apperr.Wrap(apperr.Invalid, err, "%s", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return apperr.Wrap(apperr.Unavailable, err, "the check was cancelled")
	default:
		return apperr.Wrap(apperr.Unavailable, err, "rate limit store unavailable")
	}
}

// Peek returns key's state under policy without consuming, and the block
// deciding it if any.
func (s *Service) Peek(ctx context.Context, policy, key string) (Result, error) {
	e, err := s.entry(policy, key)
	if err != nil {
		return Result{}, err
	}
	r := Result{Policy: e.Name, Key: key, DecidedBy: ByRule, Mode: e.Mode, Quota: e.Limit, Window: time.Duration(e.Period)}
	d, err := s.counters.Peek(ctx, &e.eff, key)
	if err != nil {
		return Result{}, storeError(err)
	}
	r.Verdict = e.apply(d)
	now := s.now()
	if b, ok := s.rules.block(key, policy, now); ok {
		left := b.ExpiresAt.Sub(now)
		r.Allowed, r.RetryAfter, r.DecidedBy, r.Block = false, left, ByBlock, &b
		r.ResetAfter = max(r.ResetAfter, left)
	}
	return r, nil
}

// Reset forgets key's counters under policy, and announces it so that no
// node goes on answering a refusal it remembers.
func (s *Service) Reset(ctx context.Context, policy, key string) error {
	e, err := s.entry(policy, key)
	if err != nil {
		return err
	}
	if err := s.counters.Reset(ctx, &e.eff, key); err != nil {
		return storeError(err)
	}
	s.tell(ctx, Change{Kind: KeyReset, Policy: e.Name, Key: key})
	return nil
}

func (s *Service) entry(policy, key string) (*entry, error) {
	if key == "" || len(key) > MaxKeyBytes {
		return nil, apperr.New(apperr.Invalid, "the key must be 1 to 1024 bytes")
	}
	e, ok := s.rules.lookup(policy)
	if !ok {
		return nil, apperr.New(apperr.NotFound, "no such policy: %s", policy)
	}
	return e, nil
}
