package topology

import (
	"slices"
	"time"
)

// clientKinds are the operations a client makes during the run (Status
// and Clicks are read afterwards, Deliver is seen at a receiver).
var clientKinds = []Kind{Check, Notify, Redirect, Create}

// checkAvailability fills Requests, Errors, their split by kind
// (RequestsByKind, ErrorsByKind), LongestStreak and StreakTime of every
// row from the client operations (Check, Notify, Redirect, Create) that
// belong to it. An error is an operation that is not [Op.OK]. The longest streak is the longest run of consecutive errors
// among the row's client operations in start order, all kinds together;
// its time runs from the Start of its first operation to the End of its
// last (so a streak of one lasts as long as that request). Availability is
// reported, never a violation by itself: the other checkers say which
// promise an error broke.
func checkAvailability(r *run) {
	var ops []Op
	for _, k := range clientKinds {
		ops = append(ops, r.ops[k]...)
	}
	slices.SortStableFunc(ops, func(a, b Op) int { return a.Start.Compare(b.Start) })

	type streak struct {
		n           int
		first, last time.Time
	}
	current := make([]streak, len(r.rows))
	for _, o := range ops {
		for _, i := range r.rowsAt(o.Start) {
			row := &r.rows[i]
			row.Requests++
			addKind(&row.RequestsByKind, o.Kind)
			if o.OK() {
				current[i] = streak{}
				continue
			}
			row.Errors++
			addKind(&row.ErrorsByKind, o.Kind)
			s := &current[i]
			if s.n == 0 {
				s.first = o.Start
			}
			s.n++
			if end := opEnd(o); end.After(s.last) { // a request may end before an earlier one
				s.last = end
			}
			if d := s.last.Sub(s.first); s.n > row.LongestStreak || s.n == row.LongestStreak && d > row.StreakTime {
				row.LongestStreak, row.StreakTime = s.n, d
			}
		}
	}
}

// addKind counts one operation of kind k in *m, making the map on first
// use.
func addKind(m *map[Kind]int, k Kind) {
	if *m == nil {
		*m = make(map[Kind]int, len(clientKinds))
	}
	(*m)[k]++
}

// opEnd is o's End, or its Start when no End was recorded.
func opEnd(o Op) time.Time {
	if o.End.IsZero() {
		return o.Start
	}
	return o.End
}
