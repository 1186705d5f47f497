package ratelimit

import (
	"math"
	"math/bits"
	"time"
)

// This file is the reference arithmetic of every algorithm. The Redis
// store's Lua script (redisstore/ratelimit.lua) is a line-by-line
// translation of it: integers stay below 2^53 so Lua's float64 numbers are
// exact, and the one floating-point formula (the sliding window counter's
// weight) is evaluated in the same order in both. Times are Unix
// microseconds on the store's clock.

// state is one key's state under one policy.
//
//	token_bucket:            a = level in scaled units (negative: reserved debt), t = when
//	gcra:                    a = theoretical arrival time (µs), b = its fraction × rate
//	fixed_window:            a = window index, b = count
//	sliding_window_counter:  a = window index, b = previous window's count, c = current count
//	sliding_window_log:      q = admitted (time, cost), oldest first
//	concurrency:             q = leases (expiry, cost, id), oldest first
type state struct {
	a, b, c, t int64
	q          *queue
}

// verdict is an evaluation, in µs.
type verdict struct {
	allowed             bool
	remaining           int64
	retry, reset, delay int64
}

func (v verdict) decision(limit int64) Decision {
	return Decision{
		Allowed:    v.allowed,
		Limit:      limit,
		Remaining:  max(0, v.remaining), // negative in debt (Charge)
		RetryAfter: time.Duration(v.retry) * time.Microsecond,
		ResetAfter: time.Duration(v.reset) * time.Microsecond,
	}
}

// fresh returns the state of a key with no history.
func (pp *params) fresh(now int64) state {
	switch pp.code {
	case codeTokenBucket:
		return state{a: pp.capacity, t: now}
	case codeFixedWindow, codeCounter:
		return state{a: now / pp.period}
	case codeLog, codeConcurrency:
		return state{q: new(queue)}
	}
	return state{} // gcra: an arrival time in the past is a full bucket
}

// minLevel bounds a bucket's debt so every quantity stays below 2^53.
func (pp *params) minLevel() int64 { return pp.capacity - (maxExact - 1) }

// level returns the token bucket level at now (token_bucket and gcra).
func (pp *params) level(st *state, now int64) int64 {
	if pp.code == codeGCRA {
		return pp.gcraLevel(st, now)
	}
	return pp.tbLevel(st, now)
}

// setLevel stores level lvl at now (token_bucket and gcra).
func (pp *params) setLevel(st *state, now, lvl int64) {
	if pp.code == codeGCRA {
		d := pp.capacity - lvl
		if d <= 0 {
			st.a, st.b = now, 0
			return
		}
		st.a, st.b = now+d/pp.rate, d%pp.rate
		return
	}
	st.a, st.t = lvl, max(now, st.t)
}

// bucket evaluates a request of cost at now. With reserve it may go into
// debt up to maxWait µs; the verdict's delay is the wait before acting.
func (pp *params) bucket(st *state, now, cost int64, reserve bool, maxWait int64) (verdict, int64) {
	lvl := pp.level(st, now)
	need := cost * pp.unit
	if lvl >= need {
		after := lvl - need
		return verdict{allowed: true, remaining: after / pp.unit, reset: ceilDiv(pp.capacity-after, pp.rate)}, after
	}
	wait := ceilDiv(need-lvl, pp.rate)
	if reserve && wait <= maxWait && lvl-need >= pp.minLevel() {
		after := lvl - need
		return verdict{allowed: true, delay: wait, reset: ceilDiv(pp.capacity-after, pp.rate)}, after
	}
	return verdict{remaining: max(0, lvl/pp.unit), retry: wait, reset: ceilDiv(pp.capacity-lvl, pp.rate)}, lvl
}

// take is bucket without reserve, Allow's case, written for the common
// outcome so that it is inlined: the levels' arithmetic in two small
// functions and the divisions unsigned where the operands cannot be
// negative (Go's signed division must allow for a divisor of -1). It
// returns the level after the check, or, refusing, -1 (a refusal is
// bucket's to explain).
func (pp *params) take(st *state, now, cost int64) (remaining, reset, after int64) {
	lvl := pp.tbLevel(st, now)
	if pp.code == codeGCRA {
		lvl = pp.gcraLevel(st, now)
	}
	after = lvl - cost*pp.unit
	if after < 0 {
		return 0, 0, -1
	}
	// after is in [0, capacity)
	return int64(uint64(after) / uint64(pp.unit)), int64(uceilDiv(uint64(pp.capacity-after), uint64(pp.rate))), after
}

// tbLevel is level for a token bucket.
func (pp *params) tbLevel(st *state, now int64) int64 {
	if elapsed := now - st.t; elapsed > 0 {
		if hi, lo := bits.Mul64(uint64(elapsed), uint64(pp.rate)); hi != 0 || lo >= maxExact {
			return pp.capacity
		} else {
			return min(pp.capacity, st.a+int64(lo))
		}
	}
	return st.a // no time passed, or the clock went back
}

// gcraLevel is level for gcra.
func (pp *params) gcraLevel(st *state, now int64) int64 {
	if d := st.a - now; d > 0 {
		return pp.capacity - (d*pp.rate + st.b)
	} else if d == 0 {
		return pp.capacity - st.b
	}
	return pp.capacity
}

// uceilDiv is ceilDiv for a > 0.
func uceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

// roll moves a fixed or counter window's state to the window holding now:
// a later window starts empty, and for the sliding window counter the
// window just ended becomes the previous one (any older is forgotten).
func (pp *params) roll(st *state, now int64) {
	idx := now / pp.period
	switch {
	case idx <= st.a:
	case pp.code == codeCounter && idx == st.a+1:
		st.a, st.b, st.c = idx, st.c, 0
	default:
		st.a, st.b, st.c = idx, 0, 0
	}
}

func (pp *params) fixed(st *state, now, cost int64) verdict {
	pp.roll(st, now)
	end := (st.a + 1) * pp.period
	if st.b+cost <= pp.limit {
		return verdict{allowed: true, remaining: pp.limit - st.b - cost, reset: end - now}
	}
	reset := int64(0)
	if st.b > 0 {
		reset = end - now
	}
	return verdict{remaining: pp.limit - st.b, retry: end - now, reset: reset}
}

// weight is the previous window's count still inside the sliding window
// when x µs of the current window have passed, rounded up.
func weight(prev, period, x int64) int64 {
	if prev == 0 {
		return 0
	}
	return int64(math.Ceil(float64(float64(prev)*float64(period-x)) / float64(period)))
}

// firstFit returns the smallest x in [lo, period] with weight(prev, period, x) <= room.
func firstFit(prev, period, room, lo int64) int64 {
	x := period - int64(math.Floor(float64(float64(room)*float64(period))/float64(prev)))
	x = min(max(x, lo), period)
	for x > lo && weight(prev, period, x-1) <= room {
		x--
	}
	for weight(prev, period, x) > room {
		x++
	}
	return x
}

func (pp *params) counter(st *state, now, cost int64) verdict {
	pp.roll(st, now)
	start := st.a * pp.period
	e := max(0, now-start)
	used := st.c + weight(st.b, pp.period, e)
	if used+cost <= pp.limit {
		return verdict{allowed: true, remaining: pp.limit - used - cost, reset: start + 2*pp.period - now}
	}
	v := verdict{remaining: max(0, pp.limit-used)}
	switch {
	case st.c > 0:
		v.reset = start + 2*pp.period - now
	case st.b > 0:
		v.reset = start + pp.period - now
	}
	if st.c+cost <= pp.limit {
		v.retry = firstFit(st.b, pp.period, pp.limit-st.c-cost, e) - e
	} else {
		v.retry = start + pp.period - now + firstFit(st.c, pp.period, pp.limit-cost, 0)
	}
	return v
}

// counterReset is the reset time of a counter state after consuming.
func (pp *params) counterReset(st *state, now int64) int64 {
	switch {
	case st.c > 0:
		return st.a*pp.period + 2*pp.period - now
	case st.b > 0:
		return st.a*pp.period + pp.period - now
	}
	return 0
}

// logTimes evaluates a sliding window log or a concurrency limiter. The
// queue holds, oldest first, the instants at which each entry stops
// counting: admission + period for the log, the lease expiry for leases.
// It first drops the entries that no longer count at now.
func (pp *params) logTimes(st *state, now, cost int64) (verdict, int64) {
	q := st.q
	if n := q.newest(); n > now+pp.period {
		now = n - pp.period // the clock went back: keep the log ordered
	}
	q.dropUntil(now)
	sum := q.sum
	if sum+cost <= pp.limit {
		return verdict{allowed: true, remaining: pp.limit - sum - cost, reset: pp.period}, now
	}
	v := verdict{remaining: pp.limit - sum, reset: q.newest() - now}
	v.retry = q.nth(sum+cost-pp.limit) - now
	return v, now
}

func ceilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// request is one operation's inputs.
type request struct {
	cost    int64
	id      string // concurrency: the lease
	reserve bool
	maxWait int64 // µs, with reserve
	dry     bool  // evaluate only: do not push onto a queue
}

// step evaluates r at now on st and, when allowed, consumes it in st. For
// token_bucket, gcra and the windows st is a value the caller writes back
// only if it wants the result kept; queues are changed in place unless
// r.dry. exp is when the new state equals no state.
func (pp *params) step(st *state, now int64, r request) (v verdict, exp int64) {
	switch pp.code {
	case codeTokenBucket, codeGCRA:
		var lvl int64
		v, lvl = pp.bucket(st, now, r.cost, r.reserve, r.maxWait)
		if v.allowed {
			pp.setLevel(st, now, lvl)
		}
	case codeFixedWindow:
		v = pp.fixed(st, now, r.cost)
		if v.allowed {
			st.b += r.cost
		}
	case codeCounter:
		v = pp.counter(st, now, r.cost)
		if v.allowed {
			st.c += r.cost
		}
	default:
		v, now = pp.logTimes(st, now, r.cost)
		if v.allowed && !r.dry {
			st.q.push(now+pp.period, r.cost, r.id)
		}
	}
	return v, now + v.reset
}

// uncharged returns, for a check that would pass but is not charged
// because another check of its multi-key check refused, the Remaining and
// ResetAfter of its key as it is (peek's p), not as it would be after the
// charge: what a RateLimit header's r and t must say on that refusal.
func uncharged(p verdict) (remaining int64, reset time.Duration) {
	return p.remaining, time.Duration(p.reset) * time.Microsecond
}

// peek evaluates a request of cost 1 without consuming and reports the
// current remaining allowance and reset time.
func (pp *params) peek(st *state, now int64) verdict {
	cp := *st
	v, _ := pp.step(&cp, now, request{cost: 1, dry: true})
	cur := *st
	switch pp.code {
	case codeTokenBucket, codeGCRA:
		lvl := pp.level(st, now)
		v.remaining, v.reset = max(0, lvl/pp.unit), ceilDiv(pp.capacity-lvl, pp.rate)
	case codeFixedWindow:
		pp.roll(&cur, now)
		v.remaining, v.reset = pp.limit-cur.b, 0
		if cur.b > 0 {
			v.reset = (cur.a+1)*pp.period - now
		}
	case codeCounter:
		pp.roll(&cur, now)
		e := max(0, now-cur.a*pp.period)
		v.remaining = max(0, pp.limit-cur.c-weight(cur.b, pp.period, e))
		v.reset = pp.counterReset(&cur, now)
	default: // step already dropped the entries that no longer count
		if n := st.q.newest(); n > now+pp.period {
			now = n - pp.period
		}
		v.remaining, v.reset = pp.limit-st.q.sum, 0
		if st.q.sum > 0 {
			v.reset = st.q.newest() - now
		}
	}
	return v
}
