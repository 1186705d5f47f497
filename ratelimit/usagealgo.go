package ratelimit

import "math/bits"

// The arithmetic of after-the-fact charges and refunds, translated line by
// line in redisstore/usage.lua. Times are Unix µs on the store's clock.

// ceiling is the highest count a window (or log) may reach by charges.
func (pp *params) ceiling(maxDebt int64) int64 {
	if maxDebt == 0 {
		return maxExact - 1
	}
	return pp.limit + maxDebt
}

// charge adds cost at now without refusing, as far as maxDebt allows (a
// key already past it is left as it is), and returns when the new state
// equals no state. id names a log or lease entry.
func (pp *params) charge(st *state, now, cost, maxDebt int64, id string) int64 {
	switch pp.code {
	case codeTokenBucket, codeGCRA:
		lvl := pp.level(st, now)
		floor := pp.minLevel()
		if hi, d := bits.Mul64(uint64(maxDebt), uint64(pp.unit)); maxDebt > 0 && hi == 0 && d < maxExact {
			floor = max(floor, -int64(d))
		}
		nl := lvl
		if hi, need := bits.Mul64(uint64(cost), uint64(pp.unit)); hi != 0 || need >= maxExact || lvl-int64(need) < floor {
			nl = min(lvl, floor)
		} else {
			nl = lvl - int64(need)
		}
		pp.setLevel(st, now, nl)
		return now + ceilDiv(pp.capacity-nl, pp.rate)
	case codeFixedWindow:
		pp.roll(st, now)
		st.b = max(st.b, min(pp.ceiling(maxDebt), st.b+cost))
		if st.b == 0 {
			return now
		}
		return (st.a + 1) * pp.period
	case codeCounter:
		pp.roll(st, now)
		st.c = max(st.c, min(pp.ceiling(maxDebt), st.c+cost))
		return now + pp.counterReset(st, now)
	}
	if n := st.q.newest(); n > now+pp.period {
		now = n - pp.period
	}
	st.q.dropUntil(now)
	if add := min(cost, pp.ceiling(maxDebt)-st.q.sum); add > 0 {
		st.q.push(now+pp.period, add, id)
	}
	return st.q.newest()
}

// refund gives back cost charged at instant at (entry id for a log), as far
// as it still counts, and returns when the new state equals no state.
func (pp *params) refund(st *state, now, cost, at int64, id string) int64 {
	switch pp.code {
	case codeTokenBucket, codeGCRA:
		lvl := min(pp.capacity, pp.level(st, now)+cost*pp.unit)
		pp.setLevel(st, now, lvl)
		return now + ceilDiv(pp.capacity-lvl, pp.rate)
	case codeFixedWindow:
		pp.roll(st, now)
		if st.a == at/pp.period {
			st.b = max(0, st.b-cost)
		}
		if st.b == 0 {
			return now
		}
		return (st.a + 1) * pp.period
	case codeCounter:
		pp.roll(st, now)
		switch idx := at / pp.period; st.a {
		case idx:
			st.c = max(0, st.c-cost)
		case idx + 1:
			st.b = max(0, st.b-cost)
		}
		return now + pp.counterReset(st, now)
	}
	st.q.dropUntil(now)
	st.q.reduce(id, cost)
	return st.q.newest()
}

// reduce takes up to n off the entries of id, newest first, dropping
// entries that reach 0.
func (q *queue) reduce(id string, n int64) {
	for i := len(q.e) - 1; i >= q.head && n > 0; i-- {
		if q.e[i].id != id {
			continue
		}
		d := min(n, q.e[i].n)
		q.e[i].n -= d
		q.sum -= d
		n -= d
	}
	kept := q.e[:q.head]
	for _, e := range q.e[q.head:] {
		if e.n > 0 {
			kept = append(kept, e)
		}
	}
	clear(q.e[len(kept):])
	q.e = kept
	if q.head == len(q.e) {
		q.e, q.head = q.e[:0], 0
	}
}
