package limits

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// FailoverOptions configures NewFailover.
type FailoverOptions struct {
	// Primary is the shared store (Redis). If nil (Redis was unreachable
	// when the node started), the Failover starts down, deciding every
	// call locally, until SetPrimary gives it one.
	Primary ratelimit.Store
	// Nodes is how many Sluice nodes share Primary: while it is down each
	// node admits limit / Nodes (at least 1). If zero, 1.
	Nodes int
	// FailsClosed reports whether the named policy refuses rather than
	// falls back while Primary is down. If nil, every policy fails open.
	FailsClosed func(policy string) bool
	// Timeout bounds one call to Primary, so an unresponsive server costs
	// a check at most this long once. If zero, 250ms.
	Timeout time.Duration
	// ProbeInterval is how often Run asks a down Primary whether it is
	// back. If zero, 500ms.
	ProbeInterval time.Duration
	// IsFailure reports whether an error from Primary means it is
	// unreachable (rather than a problem with the request). If nil, errors
	// wrapping ratelimit.ErrUnavailable, network errors, lost connections
	// and passed deadlines.
	IsFailure func(error) bool
	// Metrics is told fallback decisions (FellBack) and whether Primary
	// answers (StoreUp). If nil, nothing is recorded.
	Metrics *Metrics
	// Logger is told once when Primary goes down and once when it is back.
	Logger *slog.Logger
	// Now is the local limiters' clock. If nil, time.Now.
	Now func() time.Time
	// MaxHolds bounds the usage reservations the local store keeps while
	// the primary is down (ratelimit.MemoryOptions.MaxHolds); 0 is its
	// default.
	MaxHolds int
}

// Failover is a ratelimit.Store that uses Primary while it answers and a
// local MemoryStore, at each policy's limit divided by the node count,
// while it does not: a Redis outage costs accuracy, never a failed check.
// The first failing call trips it (that call is answered locally); Run
// probes Primary and switches back when it answers. It is safe for
// concurrent use.
type Failover struct {
	opts  FailoverOptions
	log   *slog.Logger
	local *ratelimit.MemoryStore
	down  atomic.Bool
	// store holds Primary, which SetPrimary may set after NewFailover.
	store atomic.Pointer[primaryStore]

	mu     sync.Mutex
	scaled map[ratelimit.Policy]*ratelimit.Policy
}

var _ ratelimit.Store = (*Failover)(nil)

// primaryStore boxes Primary for atomic.Pointer.
type primaryStore struct{ ratelimit.Store }

// NewFailover returns a Failover over opts.Primary, down if that is nil.
func NewFailover(opts FailoverOptions) *Failover {
	opts.Nodes = max(opts.Nodes, 1)
	opts.Timeout = cmp.Or(opts.Timeout, 250*time.Millisecond)
	opts.ProbeInterval = cmp.Or(opts.ProbeInterval, 500*time.Millisecond)
	if opts.FailsClosed == nil {
		opts.FailsClosed = func(string) bool { return false }
	}
	if opts.IsFailure == nil {
		opts.IsFailure = isStoreFailure
	}
	f := &Failover{opts: opts, log: opts.Logger, scaled: map[ratelimit.Policy]*ratelimit.Policy{}}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	f.local = ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: opts.Now, MaxHolds: opts.MaxHolds})
	if opts.Primary == nil {
		f.down.Store(true)
	} else {
		f.store.Store(&primaryStore{opts.Primary})
	}
	opts.Metrics.setStoreUp(opts.Primary != nil)
	return f
}

// SetPrimary gives a Failover made without a Primary the shared store,
// once it can be reached (Redis connected after the node started), and
// uses it from the next call on. It is meant to be called once.
func (f *Failover) SetPrimary(p ratelimit.Store) {
	f.store.Store(&primaryStore{p})
	if f.down.CompareAndSwap(true, false) {
		f.opts.Metrics.setStoreUp(true)
		f.log.Info("rate limit store connected: deciding on shared counters")
	}
}

// shared returns Primary. It is nil only while the Failover is down.
func (f *Failover) shared() ratelimit.Store {
	if p := f.store.Load(); p != nil {
		return p.Store
	}
	return nil
}

// isStoreFailure reports whether err means Primary could not be reached
// or could not serve (the store wraps ratelimit.ErrUnavailable, or the
// error is a network error, a lost connection or a deadline passed),
// rather than a problem with the request: an invalid policy or cost, a
// duplicate check, a cancelled context, a Redis error reply such as a
// script error or WRONGTYPE. Only the former trips the node onto local
// limiters; the latter is the caller's answer.
func isStoreFailure(err error) bool {
	var nerr net.Error
	return errors.Is(err, ratelimit.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &nerr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// Up reports whether Primary is in use.
func (f *Failover) Up() bool { return !f.down.Load() }

// probeKeys is how many keys one probe peeks. A Redis client keeps several
// pipelined connections and picks one by the key's cluster slot (rueidis:
// 2 to 8 per node); after a restart each stays stale until a command on it
// fails. Peeking one key revived only its own connection, so the first
// check on another failed and tripped the store again (logged twice, the
// gauge flapping). 64 keys spread over the slots reach every connection
// (the chance of missing one of 8 is about 0.1%).
const probeKeys = 64

// probe peeks the probe keys one after the other, each within Timeout (a
// shared deadline for all would make a slow but healthy Redis look down
// forever), and reports whether all answered.
func (f *Failover) probe(ctx context.Context, p *ratelimit.Policy) bool {
	if f.shared() == nil {
		return false
	}
	for i := range probeKeys {
		pctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
		_, err := f.shared().Peek(pctx, p, "sluice-probe-"+strconv.Itoa(i))
		cancel()
		if err != nil {
			return false
		}
	}
	return true
}

// Run probes Primary every ProbeInterval while it is down and switches back
// to it once it answers on every key of the probe, until ctx ends.
func (f *Failover) Run(ctx context.Context) error {
	t := time.NewTicker(f.opts.ProbeInterval)
	defer t.Stop()
	probe := ratelimit.Policy{Name: "probe", Algorithm: ratelimit.FixedWindow, Limit: 1, Period: time.Second}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !f.down.Load() {
			continue
		}
		if f.probe(ctx, &probe) && f.down.CompareAndSwap(true, false) {
			f.opts.Metrics.setStoreUp(true)
			f.log.Info("rate limit store answers again: back to shared counters")
		}
	}
}

// primary runs op on Primary within Timeout. It reports false when the
// call failed because Primary is unreachable (and marks it down), so the
// caller falls back.
func (f *Failover) primary(ctx context.Context, op func(ctx context.Context) error) (ok bool, err error) {
	if f.down.Load() {
		return false, nil
	}
	cctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	err = op(cctx)
	cancel()
	if err == nil || !f.opts.IsFailure(err) {
		return true, err
	}
	if ctx.Err() != nil { // the caller gave up; not the store's fault
		return true, ctx.Err()
	}
	if f.down.CompareAndSwap(false, true) {
		f.opts.Metrics.setStoreUp(false)
		f.log.Error("rate limit store unreachable: deciding on local limiters at limit / nodes until it answers",
			slog.Int("nodes", f.opts.Nodes), slog.Any("error", err))
	}
	return false, nil
}

// localPolicy is p with its limit (and burst) divided by the node count.
func (f *Failover) localPolicy(p *ratelimit.Policy) *ratelimit.Policy {
	if f.opts.Nodes == 1 {
		return p
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if lp, ok := f.scaled[*p]; ok {
		return lp
	}
	lp := *p
	n := int64(f.opts.Nodes)
	if lp.Burst > 0 {
		lp.Burst = max(1, lp.Burst/n)
	}
	lp.Limit = max(1, lp.Limit/n)
	if len(f.scaled) > 10_000 {
		clear(f.scaled)
	}
	f.scaled[*p] = &lp
	return &lp
}

// checkArgs returns the error any store gives for p and cost when the
// policy is invalid or can never admit cost, so that an outage does not turn
// it into a refusal to retry (or a cost clamped to one node's share).
func checkArgs(p *ratelimit.Policy, cost int64) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if cost > p.MaxCost() {
		return fmt.Errorf("%w: cost %d, at most %d", ratelimit.ErrCostExceedsLimit, cost, p.MaxCost())
	}
	return nil
}

// fallback decides one check locally.
func (f *Failover) fallback(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Decision, error) {
	if err := checkArgs(p, cost); err != nil {
		return ratelimit.Decision{}, err
	}
	if f.opts.FailsClosed(p.Name) {
		f.opts.Metrics.fellBack(p.Name, FailClosed)
		return f.closed(p), nil
	}
	f.opts.Metrics.fellBack(p.Name, FailOpen)
	lp := f.localPolicy(p)
	if cost > lp.MaxCost() { // admissible by the whole policy, not by one node's share
		return ratelimit.Decision{Limit: lp.Capacity(), RetryAfter: f.opts.ProbeInterval, ResetAfter: f.opts.ProbeInterval}, nil
	}
	return f.local.Allow(ctx, lp, key, cost)
}

// closed is the refusal of a fail-closed policy: try again after a probe.
func (f *Failover) closed(p *ratelimit.Policy) ratelimit.Decision {
	return ratelimit.Decision{Limit: p.Capacity(), RetryAfter: f.opts.ProbeInterval, ResetAfter: f.opts.ProbeInterval}
}

// Allow implements ratelimit.Store.
func (f *Failover) Allow(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Decision, error) {
	var d ratelimit.Decision
	if ok, err := f.primary(ctx, func(ctx context.Context) (err error) {
		d, err = f.shared().Allow(ctx, p, key, cost)
		return err
	}); ok {
		return d, err
	}
	return f.fallback(ctx, p, key, cost)
}

// AllowMulti implements ratelimit.Store.
func (f *Failover) AllowMulti(ctx context.Context, checks []ratelimit.Check) ([]ratelimit.Decision, error) {
	var ds []ratelimit.Decision
	if ok, err := f.primary(ctx, func(ctx context.Context) (err error) {
		ds, err = f.shared().AllowMulti(ctx, checks)
		return err
	}); ok {
		return ds, err
	}
	local := make([]ratelimit.Check, len(checks))
	closed := false
	for i, c := range checks {
		if err := checkArgs(c.Policy, c.Cost); err != nil {
			return nil, fmt.Errorf("check %d: %w", i, err)
		}
		if f.opts.FailsClosed(c.Policy.Name) {
			closed = true
		}
		lp := f.localPolicy(c.Policy)
		local[i] = ratelimit.Check{Policy: lp, Key: c.Key, Cost: min(c.Cost, lp.MaxCost())}
	}
	if closed {
		ds = make([]ratelimit.Decision, len(checks))
		for i, c := range checks {
			f.opts.Metrics.fellBack(c.Policy.Name, FailClosed)
			ds[i] = f.closed(c.Policy)
		}
		return ds, nil
	}
	for _, c := range checks {
		f.opts.Metrics.fellBack(c.Policy.Name, FailOpen)
	}
	for i, c := range checks {
		if c.Cost > local[i].Cost { // over one node's share: refuse the lot
			ds = make([]ratelimit.Decision, len(checks))
			for j := range ds {
				ds[j] = ratelimit.Decision{Allowed: j != i, Limit: local[j].Policy.Capacity(), RetryAfter: f.opts.ProbeInterval}
			}
			return ds, nil
		}
	}
	return f.local.AllowMulti(ctx, local)
}

// Peek implements ratelimit.Store.
func (f *Failover) Peek(ctx context.Context, p *ratelimit.Policy, key string) (ratelimit.Decision, error) {
	var d ratelimit.Decision
	if ok, err := f.primary(ctx, func(ctx context.Context) (err error) {
		d, err = f.shared().Peek(ctx, p, key)
		return err
	}); ok {
		return d, err
	}
	return f.local.Peek(ctx, f.localPolicy(p), key)
}

// Reset implements ratelimit.Store. The local state is reset too, so a key
// reset during an outage starts afresh on this node.
func (f *Failover) Reset(ctx context.Context, p *ratelimit.Policy, key string) error {
	_ = f.local.Reset(ctx, f.localPolicy(p), key)
	if ok, err := f.primary(ctx, func(ctx context.Context) error { return f.shared().Reset(ctx, p, key) }); ok {
		return err
	}
	return nil
}

// Reserve implements ratelimit.Store.
func (f *Failover) Reserve(ctx context.Context, p *ratelimit.Policy, key string, cost int64, maxWait time.Duration) (ratelimit.Reservation, error) {
	var r ratelimit.Reservation
	if ok, err := f.primary(ctx, func(ctx context.Context) (err error) {
		r, err = f.shared().Reserve(ctx, p, key, cost, maxWait)
		return err
	}); ok {
		return r, err
	}
	if err := checkArgs(p, cost); err != nil {
		return ratelimit.Reservation{}, err
	}
	lp := f.localPolicy(p)
	return f.local.Reserve(ctx, lp, key, min(cost, lp.MaxCost()), maxWait)
}

// CancelReservation implements ratelimit.Store.
func (f *Failover) CancelReservation(ctx context.Context, r ratelimit.Reservation) error {
	if ok, err := f.primary(ctx, func(ctx context.Context) error { return f.shared().CancelReservation(ctx, r) }); ok {
		return err
	}
	return f.local.CancelReservation(ctx, r)
}

// Acquire implements ratelimit.Store.
func (f *Failover) Acquire(ctx context.Context, p *ratelimit.Policy, key string, cost int64) (ratelimit.Lease, ratelimit.Decision, error) {
	var (
		l ratelimit.Lease
		d ratelimit.Decision
	)
	if ok, err := f.primary(ctx, func(ctx context.Context) (err error) {
		l, d, err = f.shared().Acquire(ctx, p, key, cost)
		return err
	}); ok {
		return l, d, err
	}
	if err := checkArgs(p, cost); err != nil {
		return ratelimit.Lease{}, ratelimit.Decision{}, err
	}
	if f.opts.FailsClosed(p.Name) {
		return ratelimit.Lease{}, f.closed(p), nil
	}
	lp := f.localPolicy(p)
	return f.local.Acquire(ctx, lp, key, min(cost, lp.MaxCost()))
}

// Release implements ratelimit.Store.
func (f *Failover) Release(ctx context.Context, l ratelimit.Lease) error {
	if ok, err := f.primary(ctx, func(ctx context.Context) error { return f.shared().Release(ctx, l) }); ok {
		return err
	}
	return f.local.Release(ctx, l)
}
