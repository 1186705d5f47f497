// Package redisstore is a ratelimit.Store on Redis or Valkey, standalone or
// Cluster, so every process sharing the server shares every limit.
//
// Each operation is one atomic step on the server: an embedded Lua script,
// loaded once and run with EVALSHA (falling back to EVAL when the server
// answers NOSCRIPT, after a restart or failover). The script reads the
// server's TIME, so all processes share one clock, and sets an expiry on
// every key it writes, at least the time the key's state is back to its
// full allowance: idle keys disappear by themselves. (A single-key check
// on a token bucket or GCRA sets twice that time, so that the key's next
// checks keep the expiry, which saves Redis most of a write; a window's
// key expires with its window.)
//
// Single-key allows on token buckets, GCRA and fixed windows, the bulk of
// all checks, take the script's fast section (fast.go): grouped by policy
// and cost, no argument but the key, one or two reply numbers per check, the
// decision rebuilt in Go. docs/benchmarks.md ("The Redis path, and five more goals")
// has the profile behind it.
//
// Concurrent callers' operations are coalesced: while a script call is in
// flight, new operations queue, and the next call carries all of them (up
// to Options.MaxBatch), each still atomic and all-or-nothing on its own.
// One caller alone pays one round trip; many callers share the server's
// per-call cost, which is what bounds throughput when each check is a
// separate script call.
//
// Keys are named prefix{key}:policy:algorithm. The braces are a Cluster
// hash tag: every policy of one key lives in one slot, so a multi-policy
// check on one key is one script call on a Cluster too.
//
// A multi-key check whose keys lie in several Cluster slots is still
// all-or-nothing, and no key ever admits more than its limit, but it is
// not one atomic step: it runs one step per slot, in ascending slot order,
// each a script call that charges its keys only if all of them fit; when
// a step refuses, the earlier steps' charges are refunded before
// AllowMulti returns (so a refused check leaves no charge), and when a
// step fails (a lost connection), they are refunded as far as the server
// answers. Meanwhile another check may be refused because of a charge
// about to be refunded. Options.HashTag maps keys always checked together
// to one slot, which makes such a check one script call again: one round
// trip instead of one per slot, and no refusal caused by another check's
// refunded charge. Standalone servers have one slot.
//
// # Usage reservations
//
// Usage reservations and after-the-fact charges run a script of their own
// (usage.go), usage.lua appended to ratelimit.lua's helpers (everything
// before its main loop), one call per operation outside the batching of
// checks. A reservation is a key of its own, prefix{tag}:res:id, in the
// slot of its first check (on a Cluster every check of a reservation must
// share that slot: see Options.HashTag), holding the checks it reserved,
// so any process sharing the server can settle it; the key expires with
// the reservation, so a client that crashed between reserve and settle
// leaves its estimate charged and nothing behind.
package redisstore

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
)

//go:embed ratelimit.lua
var scriptSource string

// Options configures a Store.
type Options struct {
	// Prefix starts every key name, so several users of one server (or
	// parallel tests) stay apart. It must not contain braces. If empty,
	// "sluice:rl:" is used.
	Prefix string
	// HashTag, if set, returns the Cluster hash tag of a key in place of
	// the key itself, so that keys checked together in one multi-key check
	// share a slot on a Cluster and take one script call instead of one per
	// slot (see the package documentation). The tag must be a pure function
	// of the key and must not contain braces. If nil, each key is its own
	// tag.
	HashTag func(key string) string
	// MaxBatch caps how many operations one script call carries. If 0, 128.
	MaxBatch int
	// MaxInFlight caps the script calls in flight at once from this Store;
	// operations arriving meanwhile wait and travel together. If 0, 2.
	MaxInFlight int
	// Timeout bounds one script call. If 0, 5 seconds.
	Timeout time.Duration
	// Now, if set, replaces the Redis server's TIME as the clock. It exists
	// for tests (the conformance suite drives time); production leaves it
	// nil, so every process shares the server's clock.
	Now func() time.Time
}

// Store is a ratelimit.Store on Redis. It is safe for concurrent use. Its
// zero value is not usable; use New.
type Store struct {
	client  rueidis.Client
	cluster bool
	prefix  string
	hashTag func(string) string
	now     func() time.Time
	timeout time.Duration
	sha     string

	leasePrefix string
	leaseSeq    atomic.Uint64

	mu          sync.Mutex
	pending     []*call
	inflight    int
	maxInflight int
	maxBatch    int
}

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store using client, which the caller owns and closes.
func New(client rueidis.Client, opts Options) (*Store, error) {
	prefix := opts.Prefix
	if prefix == "" {
		prefix = "sluice:rl:"
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q must not contain braces", prefix)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := &Store{
		client:      client,
		cluster:     client.Mode() == rueidis.ClientModeCluster,
		prefix:      prefix,
		hashTag:     opts.HashTag,
		now:         opts.Now,
		timeout:     cmp.Or(opts.Timeout, 5*time.Second),
		sha:         scriptSHA(),
		leasePrefix: hex.EncodeToString(b[:]) + ".",
		maxInflight: cmp.Or(opts.MaxInFlight, 2),
		maxBatch:    cmp.Or(opts.MaxBatch, 128),
	}
	return s, nil
}

func scriptSHA() string {
	sum := sha1.Sum([]byte(scriptSource))
	return hex.EncodeToString(sum[:])
}

// algCode is the script's name of each algorithm.
func algCode(a ratelimit.Algorithm) string {
	switch a {
	case ratelimit.TokenBucket:
		return "b"
	case ratelimit.GCRA:
		return "g"
	case ratelimit.FixedWindow:
		return "f"
	case ratelimit.SlidingWindowCounter:
		return "c"
	case ratelimit.SlidingWindowLog:
		return "l"
	case ratelimit.Concurrency:
		return "k"
	}
	return ""
}

// keySuffix ends key names: the algorithm's code, in capitals for the
// sorted sets of the log and concurrency limiters, whose members changed
// form (one per request, not one per unit of cost), so that keys of the
// old form are left to expire rather than misread.
func keySuffix(a ratelimit.Algorithm) string {
	if a == ratelimit.SlidingWindowLog || a == ratelimit.Concurrency {
		return strings.ToUpper(algCode(a))
	}
	return algCode(a)
}

// keyName returns the Redis key of key under p.
func (s *Store) keyName(p *ratelimit.Policy, key string) string {
	if s.hashTag == nil {
		return s.prefix + "{" + key + "}:" + p.Name + ":" + keySuffix(p.Algorithm)
	}
	return s.prefix + "{" + s.hashTag(key) + "}:" + p.Name + ":" + keySuffix(p.Algorithm) + ":" + key
}

// call is one operation travelling in a batch.
type call struct {
	code   string
	keys   []string
	checks []check
	slot   int // Cluster slot, or 0 on a standalone server

	inFast bool    // in its script call's fast section (see fast.go)
	reply  []int64 // status, then 5 per check
	now    int64   // the script's clock
	err    error

	wake  chan struct{} // one send: results are in, or lead is set
	lead  []*call       // when woken to lead: the batch to run
	queue bool          // still in Store.pending
}

type check struct {
	policy *ratelimit.Policy
	cost   string
	extra  string
}

// newCall starts an operation of code with room for n checks.
func newCall(code string, n int) *call {
	return &call{code: code, keys: make([]string, 0, n), checks: make([]check, 0, n)}
}

// slot returns the Cluster slot of a key name, or 0 on a standalone server.
func (s *Store) slot(name string) int {
	if !s.cluster {
		return 0
	}
	return int(slotOf(name))
}

// add appends one check to c; every check of a call lies in one slot.
func (s *Store) add(c *call, p *ratelimit.Policy, key string, cost int64, extra string) {
	name := s.keyName(p, key)
	c.slot = s.slot(name)
	c.keys = append(c.keys, name)
	c.checks = append(c.checks, check{policy: p, cost: strconv.FormatInt(cost, 10), extra: extra})
}

// decision returns the i-th check's decision.
func (c *call) decision(i int) ratelimit.Decision {
	r := c.reply[1+5*i:]
	return ratelimit.Decision{
		Allowed:    r[0] == 1,
		Limit:      c.checks[i].policy.Capacity(),
		Remaining:  max(0, r[1]), // negative in debt (Charge)
		RetryAfter: time.Duration(r[2]) * time.Microsecond,
		ResetAfter: time.Duration(r[3]) * time.Microsecond,
	}
}

// validate checks p and cost as the memory store does, so both stores
// return the same errors.
func validate(p *ratelimit.Policy, cost int64) error {
	if p == nil {
		return fmt.Errorf("%w: no policy", ratelimit.ErrInvalidPolicy)
	}
	if err := p.Validate(); err != nil {
		return err
	}
	if cost < 1 {
		return ratelimit.ErrInvalidCost
	}
	if mc := p.MaxCost(); cost > mc {
		return fmt.Errorf("%w: cost %d, at most %d", ratelimit.ErrCostExceedsLimit, cost, mc)
	}
	return nil
}

func (s *Store) single(ctx context.Context, code string, p *ratelimit.Policy, key string, cost int64, extra string) (*call, error) {
	c := newCall(code, 1)
	s.add(c, p, key, cost, extra)
	if err := s.do(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// newLease returns a new id for a lease or a sliding log entry.
func (s *Store) newLease() string {
	return s.leasePrefix + strconv.FormatUint(s.leaseSeq.Add(1), 36)
}

// entryID returns the id of a check's entry: one for the sorted sets of
// the log and concurrency limiters, none for the others.
func (s *Store) entryID(p *ratelimit.Policy) string {
	if p.Algorithm == ratelimit.SlidingWindowLog || p.Algorithm == ratelimit.Concurrency {
		return s.newLease()
	}
	return ""
}

// Allow implements ratelimit.Store.
func (s *Store) Allow(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Decision, error) {
	if err := validate(p, cost); err != nil {
		return ratelimit.Decision{}, err
	}
	c, err := s.single(ctx, "a", p, key, cost, s.entryID(p))
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return c.decision(0), nil
}

// AllowMulti implements ratelimit.Store. Checks in one Cluster slot (every
// check on a standalone server) are one script call; checks in several
// slots follow the protocol in allowSlots.
func (s *Store) AllowMulti(ctx context.Context, checks []ratelimit.Check) ([]ratelimit.Decision, error) {
	for i, ch := range checks {
		if err := validate(ch.Policy, ch.Cost); err != nil {
			return nil, fmt.Errorf("check %d: %w", i, err)
		}
		for _, d := range checks[:i] {
			if d.Policy.Name == ch.Policy.Name && d.Key == ch.Key {
				return nil, fmt.Errorf("check %d: %w: policy %q key %q", i, ratelimit.ErrDuplicateCheck, ch.Policy.Name, ch.Key)
			}
		}
	}
	steps := s.steps(checks)
	out := make([]ratelimit.Decision, len(checks))
	if len(steps) == 1 {
		if err := s.do(ctx, steps[0].c); err != nil {
			return nil, err
		}
		steps[0].decide(out)
		return out, nil
	}
	if err := s.allowSlots(ctx, steps, out); err != nil {
		return nil, err
	}
	return out, nil
}

func micros(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return min(int64(d/time.Microsecond), 1<<53-1)
}

// Reserve implements ratelimit.Store.
func (s *Store) Reserve(ctx context.Context, p *ratelimit.Policy, key string, cost int64, maxWait time.Duration) (ratelimit.Reservation, error) {
	if p != nil && p.Validate() == nil && p.Algorithm != ratelimit.TokenBucket && p.Algorithm != ratelimit.GCRA {
		return ratelimit.Reservation{}, fmt.Errorf("%w: policy %q is %s", ratelimit.ErrReserveUnsupported, p.Name, p.Algorithm)
	}
	if err := validate(p, cost); err != nil {
		return ratelimit.Reservation{}, err
	}
	c, err := s.single(ctx, "r", p, key, cost, strconv.FormatInt(micros(maxWait), 10))
	if err != nil {
		return ratelimit.Reservation{}, err
	}
	d := c.decision(0)
	r := ratelimit.Reservation{OK: d.Allowed, Decision: d, Policy: p, Key: key, Cost: cost}
	if r.OK {
		delay := c.reply[5]
		r.Delay = time.Duration(delay) * time.Microsecond
		r.Until = c.now + delay
	}
	return r, nil
}

// CancelReservation implements ratelimit.Store.
func (s *Store) CancelReservation(ctx context.Context, r ratelimit.Reservation) error {
	if !r.OK || r.Policy == nil {
		return nil
	}
	if err := validate(r.Policy, r.Cost); err != nil {
		return err
	}
	_, err := s.single(ctx, "c", r.Policy, r.Key, r.Cost, strconv.FormatInt(r.Until, 10))
	return err
}

// Peek implements ratelimit.Store.
func (s *Store) Peek(ctx context.Context, p *ratelimit.Policy, key string) (ratelimit.Decision, error) {
	if err := validate(p, 1); err != nil {
		return ratelimit.Decision{}, err
	}
	c, err := s.single(ctx, "p", p, key, 1, "")
	if err != nil {
		return ratelimit.Decision{}, err
	}
	return c.decision(0), nil
}

// Reset implements ratelimit.Store.
func (s *Store) Reset(ctx context.Context, p *ratelimit.Policy, key string) error {
	if err := validate(p, 1); err != nil {
		return err
	}
	_, err := s.single(ctx, "x", p, key, 1, "")
	return err
}

// Acquire implements ratelimit.Store.
func (s *Store) Acquire(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Lease, ratelimit.Decision, error) {
	if p != nil && p.Algorithm != ratelimit.Concurrency {
		return ratelimit.Lease{}, ratelimit.Decision{}, fmt.Errorf("%w: policy %q is %s", ratelimit.ErrNotConcurrency, p.Name, p.Algorithm)
	}
	if err := validate(p, cost); err != nil {
		return ratelimit.Lease{}, ratelimit.Decision{}, err
	}
	id := s.newLease()
	c, err := s.single(ctx, "a", p, key, cost, id)
	if err != nil {
		return ratelimit.Lease{}, ratelimit.Decision{}, err
	}
	d := c.decision(0)
	if !d.Allowed {
		return ratelimit.Lease{}, d, nil
	}
	return ratelimit.Lease{Policy: p, Key: key, ID: id, Cost: cost}, d, nil
}

// Release implements ratelimit.Store.
func (s *Store) Release(ctx context.Context, l ratelimit.Lease) error {
	if l.Policy == nil || l.ID == "" {
		return nil
	}
	if err := validate(l.Policy, l.Cost); err != nil {
		return err
	}
	_, err := s.single(ctx, "l", l.Policy, l.Key, l.Cost, l.ID)
	return err
}
