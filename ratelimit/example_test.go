package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// A token bucket of capacity 3 gaining one token per second, on a clock the
// example moves by hand.
func Example() {
	var now time.Time
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: func() time.Time { return now }})
	limiter, err := ratelimit.NewPolicyLimiter(store, ratelimit.Policy{
		Name: "api", Algorithm: ratelimit.TokenBucket, Limit: 1, Period: time.Second, Burst: 3,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, at := range []time.Duration{0, 0, 0, 0, 1000 * time.Millisecond, 1500 * time.Millisecond} {
		now = time.Unix(0, 0).Add(at)
		d, _ := limiter.Allow(ctx, "u1", 1)
		fmt.Printf("t=%v allowed=%v remaining=%d retry_after=%v\n", at, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// t=0s allowed=true remaining=2 retry_after=0s
	// t=0s allowed=true remaining=1 retry_after=0s
	// t=0s allowed=true remaining=0 retry_after=0s
	// t=0s allowed=false remaining=0 retry_after=1s
	// t=1s allowed=true remaining=0 retry_after=0s
	// t=1.5s allowed=false remaining=0 retry_after=500ms
}

// A login is limited per client IP and per target account at once: both
// consume, or neither does.
func ExampleAllowAll() {
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
	perIP := &ratelimit.Policy{Name: "login_ip", Algorithm: ratelimit.SlidingWindowLog, Limit: 20, Period: time.Minute}
	perAccount := &ratelimit.Policy{Name: "login_account", Algorithm: ratelimit.SlidingWindowLog, Limit: 2, Period: time.Minute}
	ctx := context.Background()
	for range 3 {
		ok, ds, err := ratelimit.AllowAll(ctx, store, []ratelimit.Check{
			{Policy: perIP, Key: "203.0.113.9", Cost: 1},
			{Policy: perAccount, Key: "ann", Cost: 1},
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(ok, ratelimit.Combine(ds).Remaining)
	}
	d, _ := store.Peek(ctx, perIP, "203.0.113.9")
	fmt.Println("IP remaining:", d.Remaining)
	// Output:
	// true 1
	// true 0
	// false 0
	// IP remaining: 18
}

// Simulate replays requests on a clock that starts at 0: the fixed window
// lets 10 requests through in 0.2 s around a boundary.
func ExampleSimulate() {
	p := ratelimit.Policy{Name: "five", Algorithm: ratelimit.FixedWindow, Limit: 5, Period: 10 * time.Second}
	var reqs []ratelimit.SimRequest
	for _, at := range []time.Duration{9900 * time.Millisecond, 10100 * time.Millisecond} {
		for range 5 {
			reqs = append(reqs, ratelimit.SimRequest{At: at, Key: "u1", Cost: 1})
		}
	}
	ds, _ := ratelimit.Simulate(p, reqs)
	allowed := 0
	for _, d := range ds {
		if d.Allowed {
			allowed++
		}
	}
	fmt.Println(allowed, "of", len(ds))
	// Output: 10 of 10
}

// Reserve paces an outbound rate: each call learns how long to wait.
func ExamplePolicyLimiter_Reserve() {
	var now time.Time
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: func() time.Time { return now }})
	provider, _ := ratelimit.NewPolicyLimiter(store, ratelimit.Policy{
		Name: "sms_provider", Algorithm: ratelimit.GCRA, Limit: 10, Period: time.Second, Burst: 2,
	})
	for range 4 {
		r, _ := provider.Reserve(context.Background(), "twilio", 1, time.Second)
		fmt.Println(r.OK, r.Delay)
	}
	// Output:
	// true 0s
	// true 0s
	// true 100ms
	// true 200ms
}

// A concurrency policy caps work in flight; a lease is released when the
// work is done, or expires after Period if its holder dies.
func ExamplePolicyLimiter_Acquire() {
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{})
	exports, _ := ratelimit.NewPolicyLimiter(store, ratelimit.Policy{
		Name: "exports", Algorithm: ratelimit.Concurrency, Limit: 1, Period: time.Minute,
	})
	ctx := context.Background()
	lease, d, _ := exports.Acquire(ctx, "account:42", 1)
	fmt.Println(d.Allowed)
	_, d, _ = exports.Acquire(ctx, "account:42", 1)
	fmt.Println(d.Allowed)
	_ = exports.Release(ctx, lease)
	_, d, _ = exports.Acquire(ctx, "account:42", 1)
	fmt.Println(d.Allowed)
	// Output:
	// true
	// false
	// true
}

// A token budget whose cost is known only after the work ran: reserve an
// estimate, settle with the real cost. Going over the budget leaves the key
// in debt, refused until it is repaid.
func ExamplePolicyLimiter_ReserveUsage() {
	now := time.Unix(0, 0)
	store := ratelimit.NewMemoryStore(ratelimit.MemoryOptions{Now: func() time.Time { return now }})
	tpm, err := ratelimit.NewPolicyLimiter(store, ratelimit.Policy{
		Name: "tpm", Algorithm: ratelimit.TokenBucket, Limit: 1000, Period: time.Minute,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r, _ := tpm.ReserveUsage(ctx, "key1", 100, ratelimit.UsageOptions{})
	fmt.Println("reserved:", r.Allowed, r.Decisions[0].Remaining)
	_ = r.Settle(ctx, 1300) // the model used 1300 tokens
	d, _ := tpm.Peek(ctx, "key1")
	fmt.Println("after settling:", d.Allowed, d.RetryAfter)
	_ = r.Settle(ctx, 1) // settling again changes nothing
	d, _ = tpm.Charge(ctx, "key1", 200)
	fmt.Println("after a charge:", d.Allowed, d.RetryAfter)
	// Output:
	// reserved: true 900
	// after settling: false 18.06s
	// after a charge: false 30.06s
}
