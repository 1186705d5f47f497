package ratelimittest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Epoch is where every test's clock starts: a whole day since the Unix
// epoch, so it is a window boundary for every period used here.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Harness tells the suite how to make the store under test.
type Harness struct {
	// NewStore returns an empty store whose clock is now. Stores made for
	// different tests must not share state (the Redis store uses a key
	// prefix per test).
	NewStore func(t *testing.T, now func() time.Time) ratelimit.Store
	// Idle, if set, asserts that a key whose state went back to its full
	// allowance by clock's time holds no memory: the memory store sweeps
	// and counts its keys, the Redis store checks the key's expiry.
	// resetAfter is the ResetAfter of the key's last allowed decision.
	Idle func(t *testing.T, store ratelimit.Store, clock *Clock, p *ratelimit.Policy, key string, resetAfter time.Duration)
	// Skip names cases of the suite the store does not run, each mapped
	// to its reason: a documented difference from the behaviour the case
	// pins, never a bug. Names are those of Exercise's subtests, such as
	// "RandomAgainstSimulate"; an unknown name fails the suite.
	Skip map[string]string
}

// Bundle is what each test of the suite works with.
type Bundle struct {
	Store ratelimit.Store
	Clock *Clock
	Ctx   context.Context
}

// eachAlgorithm runs test in a parallel subtest per algorithm, named for
// it, each on a store and clock of its own.
func (h Harness) eachAlgorithm(t *testing.T, test func(t *testing.T, b *Bundle, alg ratelimit.Algorithm)) {
	t.Helper()
	for _, alg := range ratelimit.Algorithms() {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			test(t, h.setup(t), alg)
		})
	}
}

func (h Harness) setup(t *testing.T) *Bundle {
	t.Helper()
	c := NewClock(Epoch)
	return &Bundle{Store: h.NewStore(t, c.Now), Clock: c, Ctx: t.Context()}
}

// At sets the clock to Epoch + d.
func (b *Bundle) At(d time.Duration) { b.Clock.Set(Epoch.Add(d)) }

// Allow is Store.Allow that fails the test on error.
func (b *Bundle) Allow(t *testing.T, p *ratelimit.Policy, key string, cost int64) ratelimit.Decision {
	t.Helper()
	d, err := b.Store.Allow(b.Ctx, p, key, cost)
	if err != nil {
		t.Fatalf("Allow(%s, %q, %d): %v", p.Name, key, cost, err)
	}
	return d
}

// Peek is Store.Peek that fails the test on error.
func (b *Bundle) Peek(t *testing.T, p *ratelimit.Policy, key string) ratelimit.Decision {
	t.Helper()
	d, err := b.Store.Peek(b.Ctx, p, key)
	if err != nil {
		t.Fatalf("Peek(%s, %q): %v", p.Name, key, err)
	}
	return d
}

func policy(alg ratelimit.Algorithm, limit int64, period time.Duration, burst int64) *ratelimit.Policy {
	return &ratelimit.Policy{Name: string(alg), Algorithm: alg, Limit: limit, Period: period, Burst: burst}
}

const ms = time.Millisecond

// Exercise runs the conformance suite against the store h makes.
func Exercise(t *testing.T, h Harness) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"WindowBoundary", testWindowBoundary},
		{"BucketSequence", testBucketSequence},
		{"RetryAfter", testRetryAfter},
		{"HalfOpenWindows", testHalfOpen},
		{"RefusalChargesNothing", testRefusalChargesNothing},
		{"CostErrors", testCostErrors},
		{"KeysAndPoliciesAreSeparate", testSeparate},
		{"MultiKeyAllOrNothing", testMulti},
		{"IdleExpiry", testIdle},
		{"Reservations", testReserve},
		{"Peek", testPeek},
		{"Reset", testReset},
		{"Concurrency", testConcurrency},
		{"RandomAgainstSimulate", testAgainstSimulate},
		{"Usage", testUsage},
	}
	cases := map[string]bool{}
	for _, tt := range tests {
		cases[tt.name] = true
	}
	for name := range h.Skip {
		if !cases[name] {
			t.Errorf("Harness.Skip names %q, which is no case of the suite", name)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if reason, ok := h.Skip[tt.name]; ok {
				t.Skip(reason)
			}
			tt.fn(t, h)
		})
	}
}

// 5 requests per 10 s, 5 sent at 9.9 s and 5 more at 10.1 s: the fixed
// window lets twice the limit through around its boundary, every other
// algorithm only the limit.
func testWindowBoundary(t *testing.T, h Harness) {
	tests := []struct {
		alg  ratelimit.Algorithm
		want int
	}{
		{ratelimit.FixedWindow, 10},
		{ratelimit.SlidingWindowLog, 5},
		{ratelimit.TokenBucket, 5},
		{ratelimit.GCRA, 5},
		{ratelimit.SlidingWindowCounter, 5},
	}
	for _, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			t.Parallel()
			b := h.setup(t)
			p := policy(tt.alg, 5, 10*time.Second, 0)
			got := 0
			for _, at := range []time.Duration{9900 * ms, 10100 * ms} {
				b.At(at)
				for range 5 {
					if b.Allow(t, p, "u1", 1).Allowed {
						got++
					}
				}
			}
			if got != tt.want {
				t.Errorf("%s allowed %d of 10 requests in 0.2 s, want %d", tt.alg, got, tt.want)
			}
		})
	}
}

// A bucket of capacity 3 gaining one token per second: a burst of 3, then
// one a second, and full again after a long pause.
func testBucketSequence(t *testing.T, h Harness) {
	rows := []struct {
		at        time.Duration
		allowed   bool
		remaining int64
		retry     time.Duration
	}{
		{0, true, 2, 0},
		{0, true, 1, 0},
		{0, true, 0, 0},
		{0, false, 0, 1000 * ms},
		{1000 * ms, true, 0, 0},
		{1500 * ms, false, 0, 500 * ms},
		{60000 * ms, true, 2, 0},
	}
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			b := h.setup(t)
			p := policy(alg, 1, time.Second, 3)
			for i, r := range rows {
				b.At(r.at)
				d := b.Allow(t, p, "u1", 1)
				if d.Allowed != r.allowed || d.Remaining != r.remaining || d.RetryAfter != r.retry || d.Limit != 3 {
					t.Errorf("row %d at %v: Allow = %+v, want allowed=%v remaining=%d retry=%v limit=3", i, r.at, d, r.allowed, r.remaining, r.retry)
				}
			}
		})
	}
}

type step struct {
	at   time.Duration
	cost int64
	want ratelimit.Decision
}

func runSteps(t *testing.T, b *Bundle, p *ratelimit.Policy, key string, steps []step) {
	t.Helper()
	for i, s := range steps {
		b.At(s.at)
		if got := b.Allow(t, p, key, s.cost); got != s.want {
			t.Errorf("step %d at %v cost %d: Allow = %+v, want %+v", i, s.at, s.cost, got, s.want)
		}
	}
}

func dec(allowed bool, limit, remaining int64, retry, reset time.Duration) ratelimit.Decision {
	return ratelimit.Decision{Allowed: allowed, Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

// RetryAfter is computed, never guessed: each algorithm's own formula.
func testRetryAfter(t *testing.T, h Harness) {
	tests := []struct {
		name  string
		p     *ratelimit.Policy
		steps []step
	}{
		{"fixed window: the next slot", policy(ratelimit.FixedWindow, 3, 10*time.Second, 0), []step{
			{1000 * ms, 2, dec(true, 3, 1, 0, 9000*ms)},
			{4000 * ms, 1, dec(true, 3, 0, 0, 6000*ms)},
			{7500 * ms, 1, dec(false, 3, 0, 2500*ms, 2500*ms)},
			{10000 * ms, 3, dec(true, 3, 0, 0, 10000*ms)},
		}},
		{"sliding log: when the oldest counted request leaves", policy(ratelimit.SlidingWindowLog, 3, 10*time.Second, 0), []step{
			{1000 * ms, 1, dec(true, 3, 2, 0, 10000*ms)},
			{2000 * ms, 1, dec(true, 3, 1, 0, 10000*ms)},
			{4000 * ms, 1, dec(true, 3, 0, 0, 10000*ms)},
			{5000 * ms, 1, dec(false, 3, 0, 6000*ms, 9000*ms)},
			{5000 * ms, 2, dec(false, 3, 0, 7000*ms, 9000*ms)},
			{11000 * ms, 1, dec(true, 3, 0, 0, 10000*ms)},
			{11000 * ms, 1, dec(false, 3, 0, 1000*ms, 10000*ms)},
		}},
		{"token bucket with cost: missing tokens over the refill rate", policy(ratelimit.TokenBucket, 2, time.Second, 4), []step{
			{0, 3, dec(true, 4, 1, 0, 1500*ms)},
			{0, 3, dec(false, 4, 1, 1000*ms, 1500*ms)},
			{250 * ms, 3, dec(false, 4, 1, 750*ms, 1250*ms)},
			{1000 * ms, 3, dec(true, 4, 0, 0, 2000*ms)},
		}},
		{"gcra with cost", policy(ratelimit.GCRA, 2, time.Second, 4), []step{
			{0, 3, dec(true, 4, 1, 0, 1500*ms)},
			{0, 3, dec(false, 4, 1, 1000*ms, 1500*ms)},
			{250 * ms, 3, dec(false, 4, 1, 750*ms, 1250*ms)},
			{1000 * ms, 3, dec(true, 4, 0, 0, 2000*ms)},
		}},
		{"sliding counter: until the weighted previous window fits", policy(ratelimit.SlidingWindowCounter, 10, 10*time.Second, 0), []step{
			{5000 * ms, 8, dec(true, 10, 2, 0, 15000*ms)},
			// 10.0 s: the previous window (8) weighs 8 × 10/10 = 8; it weighs
			// ceil(8 × 8.75/10) = 7, leaving room for 3, at 11.25 s.
			{10000 * ms, 3, dec(false, 10, 2, 1250*ms, 10000*ms)},
			// 12.5 s: it weighs ceil(8 × 7.5/10) = 6, and 6 + 3 <= 10.
			{12500 * ms, 3, dec(true, 10, 1, 0, 17500*ms)},
			// 12.5 s: current 3 + 2 leaves room 5 for the previous window,
			// which weighs ceil(8 × 6.25/10) = 5 at 13.75 s.
			{12500 * ms, 2, dec(false, 10, 1, 1250*ms, 17500*ms)},
			// 20 s: the previous window (3) weighs 3; 3 + 8 > 10 until
			// ceil(3 × (10-x)/10) <= 2, at x = 3.34 s (rounded up to the µs).
			{20000 * ms, 8, dec(false, 10, 7, 3333334*time.Microsecond, 10000*ms)},
			// In the window after, a cost that does not fit with the current
			// count waits for the next window, then for this one (7) to weigh
			// ceil(7 × (10-x)/10) <= 6: x = 1.428572 s.
			{20000 * ms, 7, dec(true, 10, 0, 0, 20000*ms)},
			{21000 * ms, 4, dec(false, 10, 0, 9000*ms+1428572*time.Microsecond, 19000*ms)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runSteps(t, h.setup(t), tt.p, "k", tt.steps)
		})
	}
}

// A request exactly one period old no longer counts.
func testHalfOpen(t *testing.T, h Harness) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingWindowLog, ratelimit.FixedWindow, ratelimit.Concurrency} {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			b := h.setup(t)
			p := policy(alg, 1, time.Second, 0)
			b.At(0)
			if d := b.Allow(t, p, "k", 1); !d.Allowed {
				t.Fatalf("first Allow = %+v, want allowed", d)
			}
			b.At(time.Second - time.Microsecond)
			if d := b.Allow(t, p, "k", 1); d.Allowed || d.RetryAfter != time.Microsecond {
				t.Errorf("Allow 1 µs before the period = %+v, want refused with RetryAfter 1µs", d)
			}
			b.At(time.Second)
			if d := b.Allow(t, p, "k", 1); !d.Allowed {
				t.Errorf("Allow exactly one period later = %+v, want allowed", d)
			}
		})
	}
}

// A refused request consumes nothing: exhaust the allowance, hammer the
// key with refused requests, and the request after RetryAfter still passes.
func testRefusalChargesNothing(t *testing.T, h Harness) {
	h.eachAlgorithm(t, func(t *testing.T, b *Bundle, alg ratelimit.Algorithm) {
		p := policy(alg, 4, time.Second, 0)
		b.At(100 * ms)
		if d := b.Allow(t, p, "k", 2); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("Allow(2) = %+v, want allowed with 2 remaining", d)
		}
		if d := b.Allow(t, p, "k", 3); d.Allowed || d.Remaining != 2 {
			t.Fatalf("Allow(3) with 2 left = %+v, want refused with 2 remaining", d)
		}
		if d := b.Allow(t, p, "k", 2); !d.Allowed || d.Remaining != 0 {
			t.Fatalf("Allow(2) after a refusal = %+v, want allowed with 0 remaining", d)
		}
		var last ratelimit.Decision
		for range 20 {
			last = b.Allow(t, p, "k", 1)
			if last.Allowed {
				t.Fatalf("Allow over the limit = %+v, want refused", last)
			}
		}
		b.Clock.Advance(last.RetryAfter)
		if d := b.Allow(t, p, "k", 1); !d.Allowed {
			t.Errorf("Allow after RetryAfter %v = %+v, want allowed", last.RetryAfter, d)
		}
	})
}

func testCostErrors(t *testing.T, h Harness) {
	b := h.setup(t)
	tests := []struct {
		name string
		p    *ratelimit.Policy
		cost int64
		want error
	}{
		{"bucket above burst", policy(ratelimit.TokenBucket, 10, time.Second, 5), 6, ratelimit.ErrCostExceedsLimit},
		{"gcra above burst", policy(ratelimit.GCRA, 10, time.Second, 5), 6, ratelimit.ErrCostExceedsLimit},
		{"window above limit", policy(ratelimit.FixedWindow, 10, time.Second, 0), 11, ratelimit.ErrCostExceedsLimit},
		{"log above limit", policy(ratelimit.SlidingWindowLog, 10, time.Second, 0), 11, ratelimit.ErrCostExceedsLimit},
		{"zero cost", policy(ratelimit.FixedWindow, 10, time.Second, 0), 0, ratelimit.ErrInvalidCost},
		{"invalid policy", policy(ratelimit.FixedWindow, 0, time.Second, 0), 1, ratelimit.ErrInvalidPolicy},
		{"unknown algorithm", policy("leaky", 1, time.Second, 0), 1, ratelimit.ErrInvalidPolicy},
	}
	for _, tt := range tests {
		if _, err := b.Store.Allow(b.Ctx, tt.p, "k", tt.cost); !errors.Is(err, tt.want) {
			t.Errorf("%s: Allow error = %v, want %v", tt.name, err, tt.want)
		}
	}
	if d := b.Allow(t, policy(ratelimit.TokenBucket, 10, time.Second, 5), "k", 5); !d.Allowed {
		t.Errorf("Allow(cost = burst) = %+v, want allowed", d)
	}
}

func testSeparate(t *testing.T, h Harness) {
	b := h.setup(t)
	for _, alg := range ratelimit.Algorithms() {
		p := policy(alg, 1, time.Minute, 0)
		q := &ratelimit.Policy{Name: "other-" + string(alg), Algorithm: alg, Limit: 1, Period: time.Minute}
		for _, c := range []struct {
			p   *ratelimit.Policy
			key string
		}{{p, "a"}, {p, "b"}, {q, "a"}} {
			if d := b.Allow(t, c.p, c.key, 1); !d.Allowed {
				t.Errorf("%s: Allow(%s, %q) = %+v, want allowed (keys and policies are separate)", alg, c.p.Name, c.key, d)
			}
		}
	}
}

func testMulti(t *testing.T, h Harness) {
	t.Run("two keys", func(t *testing.T) { testMultiTwoKeys(t, h) })
	t.Run("two policies on one key", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		perSec := &ratelimit.Policy{Name: "per_second", Algorithm: ratelimit.FixedWindow, Limit: 2, Period: time.Second}
		perDay := &ratelimit.Policy{Name: "per_day", Algorithm: ratelimit.FixedWindow, Limit: 3, Period: 24 * time.Hour}
		cs := []ratelimit.Check{{Policy: perSec, Key: "k", Cost: 1}, {Policy: perDay, Key: "k", Cost: 1}}
		var got []bool
		for _, at := range []time.Duration{0, 0, 0, time.Second, time.Second, 2 * time.Second} {
			b.At(at)
			ok, _, err := ratelimit.AllowAll(b.Ctx, b.Store, cs)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ok)
		}
		want := []bool{true, true, false, true, false, false}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("AllowAll sequence = %v, want %v", got, want)
		}
	})
	t.Run("duplicate check", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		p := policy(ratelimit.FixedWindow, 2, time.Second, 0)
		_, _, err := ratelimit.AllowAll(b.Ctx, b.Store, []ratelimit.Check{{Policy: p, Key: "k", Cost: 1}, {Policy: p, Key: "k", Cost: 1}})
		if !errors.Is(err, ratelimit.ErrDuplicateCheck) {
			t.Errorf("AllowAll with a duplicate = %v, want ErrDuplicateCheck", err)
		}
	})
	t.Run("every algorithm", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		var cs []ratelimit.Check
		for _, alg := range ratelimit.Algorithms() {
			cs = append(cs, ratelimit.Check{Policy: policy(alg, 2, time.Minute, 0), Key: "k", Cost: 1})
		}
		spent := policy(ratelimit.FixedWindow, 1, time.Minute, 0)
		spent.Name = "spent"
		b.Allow(t, spent, "k", 1)
		ok, ds, err := ratelimit.AllowAll(b.Ctx, b.Store, append(cs, ratelimit.Check{Policy: spent, Key: "k", Cost: 1}))
		if err != nil || ok {
			t.Fatalf("AllowAll with one spent policy = %v, %v; want refused", ok, err)
		}
		for i, c := range cs {
			if d := b.Peek(t, c.Policy, "k"); d.Remaining != d.Limit {
				t.Errorf("%s after a refused multi-key check: Peek = %+v, want nothing consumed", c.Policy.Name, d)
			}
			if d := ds[i]; !d.Allowed || d.Remaining != d.Limit {
				t.Errorf("%s in a refused multi-key check: %+v, want allowed with its whole limit remaining (nothing was charged)", c.Policy.Name, d)
			}
		}
	})
	t.Run("refusal reports what remains", func(t *testing.T) { testMultiRefusalRemains(t, h) })
}

// testMultiTwoKeys: a refused multi-key check charges neither key.
func testMultiTwoKeys(t *testing.T, h Harness) {
	t.Parallel()
	b := h.setup(t)
	ip := &ratelimit.Policy{Name: "login_ip", Algorithm: ratelimit.SlidingWindowLog, Limit: 3, Period: time.Minute}
	acct := &ratelimit.Policy{Name: "login_account", Algorithm: ratelimit.TokenBucket, Limit: 2, Period: time.Minute}
	checks := func(ipKey, user string) []ratelimit.Check {
		return []ratelimit.Check{{Policy: ip, Key: ipKey, Cost: 1}, {Policy: acct, Key: user, Cost: 1}}
	}
	want := []bool{true, true, false}
	for i, w := range want {
		ok, ds, err := ratelimit.AllowAll(b.Ctx, b.Store, checks("203.0.113.9", "ann"))
		if err != nil {
			t.Fatal(err)
		}
		if ok != w {
			t.Errorf("attempt %d: AllowAll = %v %+v, want %v", i, ok, ds, w)
		}
	}
	// The refused third attempt did not charge the IP: it has 1 left.
	if d := b.Peek(t, ip, "203.0.113.9"); d.Remaining != 1 {
		t.Errorf("IP after a refused multi-key check: Peek = %+v, want 1 remaining", d)
	}
	// Another account from the same IP passes, then the IP is spent.
	if ok, ds, _ := ratelimit.AllowAll(b.Ctx, b.Store, checks("203.0.113.9", "bob")); !ok {
		t.Errorf("AllowAll(bob) = %+v, want allowed", ds)
	}
	ok, ds, _ := ratelimit.AllowAll(b.Ctx, b.Store, checks("203.0.113.9", "cy"))
	if ok || !ds[1].Allowed || ds[0].Allowed {
		t.Errorf("AllowAll(cy) with the IP spent = %v %+v, want refused by the IP only", ok, ds)
	}
	if d := b.Peek(t, acct, "cy"); d.Remaining != 2 {
		t.Errorf("account cy after a refused check: Peek = %+v, want 2 remaining", d)
	}
}

// testMultiRefusalRemains: a refusal reports, for the policies it did not
// charge, what remains of them: 3 a minute and 1,000 a day, four
// requests, the fourth refused by the minute; the day has 997 left, in
// the refusal's decision as in the key's state.
func testMultiRefusalRemains(t *testing.T, h Harness) {
	t.Parallel()
	b := h.setup(t)
	for _, alg := range ratelimit.Algorithms() {
		if alg == ratelimit.Concurrency {
			continue // leases, not a rate
		}
		tiny := &ratelimit.Policy{Name: "tiny_" + string(alg), Algorithm: alg, Limit: 3, Period: time.Minute}
		daily := &ratelimit.Policy{Name: "daily_" + string(alg), Algorithm: alg, Limit: 1000, Period: 24 * time.Hour}
		cs := []ratelimit.Check{{Policy: tiny, Key: "k", Cost: 1}, {Policy: daily, Key: "k", Cost: 1}}
		var ds []ratelimit.Decision
		for i := range 4 {
			var ok bool
			var err error
			ok, ds, err = ratelimit.AllowAll(b.Ctx, b.Store, cs)
			if err != nil || ok != (i < 3) {
				t.Fatalf("%s: attempt %d = %v, %v; want allowed only the first 3", alg, i+1, ok, err)
			}
		}
		peek := b.Peek(t, daily, "k")
		if d := ds[1]; !d.Allowed || d.Remaining != 997 || peek.Remaining != 997 || d.ResetAfter != peek.ResetAfter {
			t.Errorf("%s: the refusal's daily decision = %+v, its state %+v; want allowed, 997 remaining in both, the same reset", alg, d, peek)
		}
		if d := ds[0]; d.Allowed || d.Remaining != 0 {
			t.Errorf("%s: the refusal's tiny decision = %+v, want refused with 0 remaining", alg, d)
		}
	}
}

// A key back to its full allowance holds no memory.
func testIdle(t *testing.T, h Harness) {
	h.eachAlgorithm(t, func(t *testing.T, b *Bundle, alg ratelimit.Algorithm) {
		p := policy(alg, 3, 10*time.Second, 0)
		b.At(2500 * ms)
		b.Allow(t, p, "idle", 1)
		d := b.Allow(t, p, "idle", 1)
		b.Clock.Advance(d.ResetAfter)
		if got := b.Peek(t, p, "idle"); got.Remaining != 3 || got.ResetAfter != 0 {
			t.Errorf("Peek after ResetAfter %v = %+v, want full with no ResetAfter", d.ResetAfter, got)
		}
		if h.Idle != nil {
			h.Idle(t, b.Store, b.Clock, p, "idle", d.ResetAfter)
		}
	})
}

func testReserve(t *testing.T, h Harness) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(string(alg), func(t *testing.T) {
			t.Parallel()
			b := h.setup(t)
			p := policy(alg, 1, time.Second, 2) // 1 per second, burst 2
			reserve := func(maxWait time.Duration) ratelimit.Reservation {
				t.Helper()
				r, err := b.Store.Reserve(b.Ctx, p, "pace", 1, maxWait)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			wantDelays := []time.Duration{0, 0, time.Second, 2 * time.Second}
			var rs []ratelimit.Reservation
			for i, want := range wantDelays {
				r := reserve(time.Minute)
				if !r.OK || r.Delay != want {
					t.Errorf("reservation %d = ok %v delay %v, want delay %v", i, r.OK, r.Delay, want)
				}
				rs = append(rs, r)
			}
			if r := reserve(2 * time.Second); r.OK || r.Decision.RetryAfter != 3*time.Second {
				t.Errorf("reservation beyond maxWait = %+v, want refused with RetryAfter 3s", r)
			}
			// Nothing was taken by the refused reservation; an Allow is
			// refused while the debt lasts.
			if d := b.Allow(t, p, "pace", 1); d.Allowed || d.RetryAfter != 3*time.Second {
				t.Errorf("Allow during debt = %+v, want refused with RetryAfter 3s", d)
			}
			// Cancelling the last reservation gives its second back.
			if err := b.Store.CancelReservation(b.Ctx, rs[3]); err != nil {
				t.Fatal(err)
			}
			if r := reserve(time.Minute); !r.OK || r.Delay != 2*time.Second {
				t.Errorf("reservation after a cancel = %+v, want delay 2s", r)
			}
			// A reservation whose time has come cannot be cancelled.
			b.Clock.Advance(time.Second)
			if err := b.Store.CancelReservation(b.Ctx, rs[2]); err != nil {
				t.Fatal(err)
			}
			if r := reserve(time.Minute); !r.OK || r.Delay != 2*time.Second {
				t.Errorf("reservation after a late cancel = %+v, want delay 2s", r)
			}
		})
	}
	t.Run("unsupported", func(t *testing.T) {
		t.Parallel()
		b := h.setup(t)
		for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowLog, ratelimit.SlidingWindowCounter, ratelimit.Concurrency} {
			_, err := b.Store.Reserve(b.Ctx, policy(alg, 1, time.Second, 0), "k", 1, time.Minute)
			if !errors.Is(err, ratelimit.ErrReserveUnsupported) {
				t.Errorf("%s: Reserve error = %v, want ErrReserveUnsupported", alg, err)
			}
		}
	})
}

func testPeek(t *testing.T, h Harness) {
	h.eachAlgorithm(t, func(t *testing.T, b *Bundle, alg ratelimit.Algorithm) {
		p := policy(alg, 2, 10*time.Second, 0)
		if d := b.Peek(t, p, "k"); d != dec(true, 2, 2, 0, 0) {
			t.Errorf("Peek of a new key = %+v, want full", d)
		}
		b.Allow(t, p, "k", 1)
		d1 := b.Peek(t, p, "k")
		d2 := b.Peek(t, p, "k")
		if d1 != d2 || d1.Remaining != 1 || !d1.Allowed || d1.ResetAfter == 0 {
			t.Errorf("Peek after one Allow = %+v then %+v, want the same, allowed, 1 remaining, a ResetAfter", d1, d2)
		}
		a := b.Allow(t, p, "k", 1)
		if d := b.Peek(t, p, "k"); d.Allowed || d.Remaining != 0 || d.ResetAfter != a.ResetAfter || d.RetryAfter == 0 {
			t.Errorf("Peek when spent = %+v, want refused, 0 remaining, ResetAfter %v, a RetryAfter", d, a.ResetAfter)
		}
	})
}

func testReset(t *testing.T, h Harness) {
	h.eachAlgorithm(t, func(t *testing.T, b *Bundle, alg ratelimit.Algorithm) {
		p := policy(alg, 1, time.Hour, 0)
		b.Allow(t, p, "k", 1)
		if d := b.Allow(t, p, "k", 1); d.Allowed {
			t.Fatalf("second Allow = %+v, want refused", d)
		}
		if err := b.Store.Reset(b.Ctx, p, "k"); err != nil {
			t.Fatal(err)
		}
		if d := b.Allow(t, p, "k", 1); !d.Allowed {
			t.Errorf("Allow after Reset = %+v, want allowed", d)
		}
	})
}

func testConcurrency(t *testing.T, h Harness) {
	b := h.setup(t)
	p := &ratelimit.Policy{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: 3, Period: 30 * time.Second}
	acquire := func(cost int64) (ratelimit.Lease, ratelimit.Decision) {
		t.Helper()
		l, d, err := b.Store.Acquire(b.Ctx, p, "k", cost)
		if err != nil {
			t.Fatal(err)
		}
		return l, d
	}
	l1, d := acquire(1)
	if !d.Allowed || d.Remaining != 2 || l1.ID == "" {
		t.Fatalf("Acquire(1) = %+v %+v, want allowed with 2 remaining", l1, d)
	}
	b.Clock.Advance(10 * time.Second)
	l2, d := acquire(2)
	if !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Acquire(2) = %+v, want allowed with 0 remaining", d)
	}
	if l, d := acquire(1); d.Allowed || l.ID != "" || d.RetryAfter != 20*time.Second {
		t.Errorf("Acquire over the limit = %+v %+v, want refused until the first lease expires (20s)", l, d)
	}
	if err := b.Store.Release(b.Ctx, l2); err != nil {
		t.Fatal(err)
	}
	if err := b.Store.Release(b.Ctx, l2); err != nil {
		t.Errorf("second Release of a lease: %v, want nil", err)
	}
	if _, d := acquire(2); !d.Allowed {
		t.Errorf("Acquire(2) after Release = %+v, want allowed", d)
	}
	// l1 is never released, as if its holder crashed: its slot frees
	// itself after the lease lifetime.
	if _, d := acquire(1); d.Allowed {
		t.Fatalf("Acquire while full = %+v, want refused", d)
	}
	b.Clock.Advance(20 * time.Second)
	if _, d := acquire(1); !d.Allowed {
		t.Errorf("Acquire after the crashed holder's lease expired = %+v, want allowed", d)
	}
	if _, _, err := b.Store.Acquire(b.Ctx, policy(ratelimit.TokenBucket, 1, time.Second, 0), "k", 1); !errors.Is(err, ratelimit.ErrNotConcurrency) {
		t.Errorf("Acquire on a token bucket: %v, want ErrNotConcurrency", err)
	}
}

// The store agrees with Simulate on a pseudo-random arrival sequence for
// every algorithm (Simulate is the memory store; for the memory store this
// checks that the fake clock and a shifted epoch do not matter).
func testAgainstSimulate(t *testing.T, h Harness) {
	h.eachAlgorithm(t, func(t *testing.T, b *Bundle, alg ratelimit.Algorithm) {
		p := &ratelimit.Policy{Name: "sim", Algorithm: alg, Limit: 7, Period: 3 * time.Second, Burst: 5}
		if alg != ratelimit.TokenBucket && alg != ratelimit.GCRA {
			p.Burst = 0
		}
		seed := uint64(len(alg)) * 2654435761
		var reqs []ratelimit.SimRequest
		var at time.Duration
		for range 300 {
			seed = seed*6364136223846793005 + 1442695040888963407
			at += time.Duration(seed>>40%400) * ms
			cost := int64(seed>>20%3) + 1
			key := []string{"a", "b"}[seed>>10%2]
			reqs = append(reqs, ratelimit.SimRequest{At: at, Key: key, Cost: cost})
		}
		want, err := ratelimit.Simulate(*p, reqs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range reqs {
			b.At(r.At)
			if got := b.Allow(t, p, r.Key, r.Cost); got != want[i] {
				t.Fatalf("request %d (%+v): Allow = %+v, Simulate = %+v", i, r, got, want[i])
			}
		}
	})
}
