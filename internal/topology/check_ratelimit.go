package topology

import (
	"time"
)

// checkRateLimits holds the allowed Check operations to their limits.
//
// Allowed checks are grouped by key and Window (the harness must set
// Window: checks without one all fall in one window): each key of a multi-key
// check counts once per allowed check. A window's extent runs from its
// Window (or its first check's Start, if earlier) to the End of its last
// allowed check; it is "during" every fault whose widened interval
// overlaps that extent. The limit of a window is the largest Limit among
// its checks (a check recorded without a limit counts but sets none; a
// window with no limit is not judged).
//
//   - Outside faults a window admits at most its limit.
//   - During a fault it admits at most the limit plus the fail-open
//     allowance (docs/ratelimit.md, "When Redis fails"): the nodes that
//     lose Redis decide on local limiters at limit / nodes each (at least
//     1), so N = h.Nodes nodes admit up to N × max(1, limit/N) more, and
//     never less than limit more: at most 2 × limit in all for limits
//     that the nodes divide. A node restarted during the window (a
//     fault's Restarts) starts its local limiters empty, so each restart
//     of a fault overlapping the window adds max(1, limit/N) more.
//
// Row.Overshoot is the worst admitted/limit among the windows of the row
// (0 when the row has none).
func checkRateLimits(r *run) {
	type window struct {
		key     string
		start   time.Time
		first   time.Time
		last    time.Time
		limit   int64
		allowed int64
	}
	type id struct {
		key   string
		start time.Time
	}
	windows := make(map[id]*window)
	var order []id // first-seen order, for deterministic violations
	for _, o := range r.ops[Check] {
		if !o.Allowed {
			continue
		}
		for _, key := range dedupe(o.Keys) {
			k := id{key, o.Window.UTC()}
			w := windows[k]
			if w == nil {
				w = &window{key: key, start: o.Window, first: o.Start, last: opEnd(o)}
				windows[k] = w
				order = append(order, k)
			}
			w.allowed++
			w.limit = max(w.limit, o.Limit)
			if o.Start.Before(w.first) {
				w.first = o.Start
			}
			if e := opEnd(o); e.After(w.last) {
				w.last = e
			}
		}
	}

	nodes := int64(max(r.nodes, 1))
	for _, k := range order {
		w := windows[k]
		if w.limit <= 0 {
			continue
		}
		from := w.first
		if !w.start.IsZero() && w.start.Before(from) {
			from = w.start
		}
		ratio := float64(w.allowed) / float64(w.limit)
		rows := r.rowsOverlapping(from, w.last)
		share := max(1, w.limit/nodes)
		var restarts int64
		for _, i := range rows {
			if i != r.none() {
				restarts += int64(r.faults[i].Restarts)
			}
		}
		for _, i := range rows {
			row := &r.rows[i]
			row.Overshoot = max(row.Overshoot, ratio)
			bound := w.limit
			if i != r.none() {
				bound += max(w.limit, nodes*share) + restarts*share
			}
			if w.allowed > bound {
				r.violate("rate limit %s: key %q window %s admitted %d of limit %d (%.2fx), over the bound %d",
					r.where(i), w.key, w.start.UTC().Format(time.RFC3339Nano), w.allowed, w.limit, ratio, bound)
			}
		}
	}
}

// dedupe returns keys without repeats, in order.
func dedupe(keys []string) []string {
	seen := make(map[string]bool, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
