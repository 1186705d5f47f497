// Package ratelimit decides whether a request may go ahead now, how much
// allowance is left, and how long to wait when it may not.
//
// # Model
//
// A [Policy] names an algorithm and its parameters (limit, period, burst). A
// [Store] keeps the per-key state of every policy and applies a check as one
// atomic step: [MemoryStore] in this process, redisstore (a sibling package)
// on a Redis server shared by many processes. A [PolicyLimiter] binds one
// policy to one store and implements [Limiter], the one-method interface
// callers depend on.
//
// Six algorithms are offered, chosen by [Policy.Algorithm]:
//
//   - token_bucket: a bucket of Burst tokens refilled at Limit per Period.
//     Bursts up to Burst, then a steady rate. RetryAfter is the missing
//     tokens divided by the refill rate.
//   - gcra: the generic cell rate algorithm. It stores one instant per key
//     (the theoretical arrival time) instead of a level and a time, and
//     admits exactly the sequences the token bucket with the same rate and
//     burst admits (a property test checks this).
//   - fixed_window: one counter per window of Period, windows aligned to
//     multiples of Period from the Unix epoch. Cheapest, but lets up to
//     twice the limit through around a window boundary. RetryAfter is the
//     time to the next window.
//   - sliding_window_log: remembers when each admitted unit of cost arrived
//     and counts those in the last Period. Exact; memory O(Limit) per key.
//     RetryAfter is when the oldest counted request leaves the window.
//   - sliding_window_counter: the current and the previous fixed window,
//     the previous one weighted by how much of it still overlaps the
//     sliding window. Approximate, constant memory.
//   - concurrency: at most Limit requests in flight. [PolicyLimiter.Acquire]
//     takes a slot and returns a [Lease] to release on completion; a lease
//     that is never released (its holder crashed) expires after Period.
//
// Windows are half-open: a request exactly one Period old no longer counts.
// A refused request consumes nothing. A cost above what the policy can ever
// admit (Burst for the buckets, Limit otherwise) is refused with
// [ErrCostExceedsLimit] rather than a RetryAfter that would never come true.
//
// # Time
//
// Every store works in whole microseconds of its clock: the memory store
// reads [MemoryOptions.Now] (time.Now by default), the Redis store reads the
// Redis server's TIME, so all processes sharing a Redis share one clock.
// Token bucket and GCRA arithmetic is exact integer arithmetic on a scaled
// level, so the memory and Redis stores reach identical decisions, and
// [Simulate] (a fresh memory store on a clock that starts at the Unix epoch)
// agrees exactly with a live limiter given the same arrival times relative
// to a window start.
//
// # Several checks at once
//
// [AllowAll] checks several (policy, key, cost) triples at once, for
// example a client's IP and the account it targets, or one key against
// "10 per second" and "1,000 per day": every check consumes only if every
// check allows, atomically.
//
// # Reservations
//
// [PolicyLimiter.Reserve] and [PolicyLimiter.Wait] take capacity now and tell
// the caller how long to wait before acting, like golang.org/x/time/rate's
// Reserve and Wait, so several processes can pace one shared outbound rate.
// They are offered by the token bucket and GCRA, whose state can go into
// debt; a reservation can be cancelled before its time comes.
//
// # Usage-based limits
//
// Some costs are known only after the work ran (an LLM's tokens, bytes
// served), and some limits count only some outcomes (failed logins).
// [PolicyLimiter.Charge] (and [Charge] for several keys) charges work
// already done: it is never refused and may push a key past its limit into
// debt (negative tokens for the buckets, a later theoretical arrival for
// GCRA, a count above Limit for the windows), bounded by [Policy.MaxDebt];
// checks are refused until the debt is repaid by refill or by the window
// rolling. [PolicyLimiter.ReserveUsage] (and [ReserveUsage]) reserves an
// estimate, all-or-nothing over several checks, and returns a
// [UsageReservation]: Settle replaces the estimate by the real cost
// atomically on every key (a refund, or an extra charge as Charge), once
// (settling again changes nothing), and Cancel gives it all back. A
// reservation not settled within its TTL ([DefaultReservationTTL], 5 min)
// keeps its estimate. With [ChargeOnSettle] settling with 0 gives the
// estimate back (an outcome not counted), but until then the reservation
// counts like any other; a concurrency check in a reservation takes a lease
// that Settle releases. The unsettled reservations of one key, and of one
// [UsageOptions.Owner], are bounded ([DefaultMaxHolds],
// [DefaultMaxOwnerHolds]): past that Hold answers [ErrTooManyHolds]. Stores offer this through
// [UsageStore]; the memory store and redisstore implement it (a
// reservation is then a Redis key, settled from any process).
//
// # Memory store: the table
//
// A shard's states live in an open-addressing table with linear probing:
// a power-of-two array of 64-byte slots, each holding a pair's full
// 128-bit identity and its algorithm state inline. A check reads and
// writes its slot in place, so at 100k keys and more it costs one cache
// miss (two when the probe runs onto the next line, which the hardware's
// adjacent-line prefetch usually covers). Slots hold no pointers, so the
// garbage collector never scans the table. Deletion shifts the following
// entries of the cluster back instead of leaving tombstones.
//
// The table is swept when an insertion would fill it past 5/8 (past 3/4,
// clusters grow long enough to cost a second cache miss per check). The
// sweep deletes every idle state (one equal to no state), then the table
// keeps its size if between 1/4 and 1/2 of it is still in use, doubles if
// more is, and otherwise shrinks to the smallest power of two (at least
// 16 slots) at least twice what is in use. So a shard holds at most 2.5
// times the states that were live at its last sweep (or 10), in at most 4
// times as many slots: between about 100 and 256 bytes per active key.
//
// # Memory store: the hash
//
// The memory store identifies a (policy, key) pair by a 128-bit hash of
// both strings: hashing is a large part of what a check costs besides its
// one cache miss, and maphash would need four calls (two seeds, two
// strings) for the same 128 bits.
//
// Each string is absorbed by wyhash's construction (the one behind Go's
// own fallback map hash) run as two lanes with independent random seeds
// over the same loads: each 16-byte block (a, b) is folded into a lane as
// the 128-bit product of a and b, each xored with the lane's state and
// constants, reduced to 64 bits by xoring the halves. A string's last
// block also carries its length. The key and the policy name are absorbed
// apart, on differently seeded lanes, and joined lane by lane, so the
// name's lanes can be computed once per policy. All lanes are keyed by a
// random per-store seed, so clients who pick keys cannot pick colliding
// ones without knowing it.
//
// # Dependencies
//
// The package is a public library on the standard library alone: it must
// not import Prometheus, database drivers, Redis or NATS clients
// (cmd/sluice's TestDomainImportsNoInfrastructure checks it). A store on a
// server lives in a package of its own, such as redisstore.
package ratelimit
