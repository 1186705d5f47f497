package limits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/ratelimit"
)

// Policy returns the named policy in force and its source.
func (s *Service) Policy(name string) (NamedPolicy, Source, error) {
	p, src, ok := s.rules.Policy(name)
	if !ok {
		return NamedPolicy{}, "", apperr.New(apperr.NotFound, "no such policy: %s", name)
	}
	return p, src, nil
}

// Policies returns every policy in force, by name, with its source.
func (s *Service) Policies() ([]NamedPolicy, []Source) { return s.rules.Policies() }

// PutPolicy creates or replaces a stored policy and makes every node apply
// it. Policies from the configuration file cannot be changed (Conflict).
func (s *Service) PutPolicy(ctx context.Context, p NamedPolicy) (created bool, err error) {
	p = p.Normalize()
	if err := p.Validate(""); err != nil {
		return false, err
	}
	if _, src, ok := s.rules.Policy(p.Name); ok && src == FromConfig {
		return false, apperr.New(apperr.Conflict, "policy %s is defined in the configuration file; change it there", p.Name)
	}
	created, err = s.rules.opts.Store.PutPolicy(ctx, p)
	if err != nil {
		return false, fmt.Errorf("put policy %q: %w", p.Name, err)
	}
	s.changed(ctx, p.Name)
	return created, nil
}

// DeletePolicy deletes a stored policy on every node.
func (s *Service) DeletePolicy(ctx context.Context, name string) error {
	if _, src, ok := s.rules.Policy(name); ok && src == FromConfig {
		return apperr.New(apperr.Conflict, "policy %s is defined in the configuration file; remove it there", name)
	}
	if err := s.rules.opts.Store.DeletePolicy(ctx, name); err != nil {
		return fmt.Errorf("delete policy %q: %w", name, err)
	}
	s.changed(ctx, name)
	return nil
}

// BlockKey blocks req.Key on every node for req.Duration.
func (s *Service) BlockKey(ctx context.Context, req BlockRequest) (Block, error) {
	if err := req.Validate(); err != nil {
		return Block{}, err
	}
	now := s.now().Truncate(time.Microsecond)
	if err := s.roomForBlock(req, now); err != nil {
		return Block{}, err
	}
	b := Block{Key: req.Key, Policy: req.Policy, Domain: req.Domain, Reason: req.Reason, CreatedAt: now,
		ExpiresAt: now.Add(req.Duration)}
	if err := s.rules.opts.Store.PutBlock(ctx, b); err != nil {
		return Block{}, fmt.Errorf("block key: %w", err)
	}
	s.changed(ctx, "")
	return b, nil
}

// roomForBlock refuses a new block (not one replacing the block of the
// same key, policy and domain) once MaxBlocks are in force, as this node
// knows them (it reloads at once after each change made through it).
func (s *Service) roomForBlock(req BlockRequest, now time.Time) error {
	n := 0
	for _, b := range s.rules.Blocks(now) {
		if b.Key == req.Key && b.Policy == req.Policy && b.Domain == req.Domain {
			return nil
		}
		n++
	}
	if n >= s.maxBlocks {
		return apperr.New(apperr.TooMany, "%d blocks are in force, the bound (ratelimit.max_blocks); lift some "+
			"(DELETE /v1/ratelimit/blocks/{key}) or let them expire before adding more", n)
	}
	return nil
}

// Blocks returns the blocks in force.
func (s *Service) Blocks() []Block { return s.rules.Blocks(s.now()) }

// Unblock lifts key's blocks on every node: all of them when policy and
// domain are nil, else those of *policy and of *domain ("" for the block
// of every policy, or without domain). NotFound when there was none.
func (s *Service) Unblock(ctx context.Context, key string, policy, domain *string) error {
	n, err := s.rules.opts.Store.DeleteBlocks(ctx, key, policy, domain)
	if err != nil {
		return fmt.Errorf("unblock key: %w", err)
	}
	s.changed(ctx, "")
	if n == 0 {
		return apperr.New(apperr.NotFound, "no block on key %q", key)
	}
	return nil
}

// changed reloads this node's rules at once and announces the change of
// policy (or of the blocks, policy empty) to every node. Failures are
// logged: the write is done, and the periodic refresh will catch up.
func (s *Service) changed(ctx context.Context, policy string) {
	ctx = context.WithoutCancel(ctx)
	if err := s.rules.Load(ctx); err != nil {
		s.log.Warn("reloading rate limit rules after a change failed", slog.Any("error", err))
	}
	s.tell(ctx, Change{Kind: RulesChanged, Policy: policy})
}

// MaxSimRequests bounds one simulation.
const MaxSimRequests = 100_000

// Simulate replays reqs under p as ratelimit.Simulate does (a fresh store
// on a clock starting at 0) and applies p's mode to each decision, exactly
// as a live check would. p must be valid; bad requests fail with apperr
// Invalid naming requests[i].
func Simulate(p NamedPolicy, reqs []ratelimit.SimRequest) ([]Verdict, error) {
	p = p.Normalize()
	if len(reqs) > MaxSimRequests {
		return nil, apperr.New(apperr.Invalid, "at most %d requests per simulation", MaxSimRequests)
	}
	eff := p.Effective()
	var fe []apperr.FieldError
	for i, r := range reqs {
		bad := func(field, detail string) {
			fe = append(fe, apperr.FieldError{Field: fmt.Sprintf("requests[%d].%s", i, field), Detail: detail})
		}
		switch {
		case r.Key == "":
			bad("key", "is required")
		case len(r.Key) > MaxKeyBytes:
			bad("key", "must be at most 1024 bytes")
		}
		switch {
		case r.Cost < 1:
			bad("cost", "must be at least 1")
		case r.Cost > eff.MaxCost():
			bad("cost", fmt.Sprintf("exceeds what the policy can ever admit (%d)", eff.MaxCost()))
		}
		if r.At < 0 {
			bad("at_ms", "must not be negative")
		}
	}
	if err := apperr.Fields(apperr.Invalid, "the simulation is invalid", fe); err != nil {
		return nil, err
	}
	ds, err := ratelimit.Simulate(eff, reqs)
	if err != nil {
		return nil, apperr.Wrap(apperr.Invalid, err, "%s", err.Error())
	}
	out := make([]Verdict, len(ds))
	for i, d := range ds {
		out[i] = p.apply(d)
	}
	return out, nil
}

// describe renders an apperr field error as one line, for configuration
// errors that have no HTTP edge.
func describe(err error) error {
	ae, ok := errors.AsType[*apperr.Error](err)
	if !ok || len(ae.Fields) == 0 {
		return err
	}
	parts := make([]string, len(ae.Fields))
	for i, f := range ae.Fields {
		parts[i] = f.Field + " " + f.Detail
	}
	return errors.New(strings.Join(parts, "; "))
}
