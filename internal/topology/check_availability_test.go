package topology

import (
	"testing"
	"time"
)

func TestCheckAvailability(t *testing.T) {
	t.Parallel()
	only := func(r Row) Row {
		return Row{Fault: r.Fault, Requests: r.Requests, Errors: r.Errors, LongestStreak: r.LongestStreak, StreakTime: r.StreakTime,
			RequestsByKind: r.RequestsByKind, ErrorsByKind: r.ErrorsByKind}
	}
	kill := mkFault("kill -9 node 2", 1000, 2000)
	runChecks(t, []checkTest{
		{
			name: "no errors",
			ops:  []Op{op(Check, 0, 200), op(Notify, 1, 202), op(Redirect, 2, 302), op(Create, 3, 201), op(Check, 4, 429), op(Redirect, 5, 404)},
			rows: []Row{{Fault: NoFault, Requests: 6,
				RequestsByKind: map[Kind]int{Check: 2, Notify: 1, Redirect: 2, Create: 1}}},
			otherCheckers: true,
		},
		{
			name: "a streak of 3 then a success",
			ops: []Op{
				op(Check, 0, 200),
				op(Check, 10, 503),
				op(Redirect, 20, 0, failed),
				op(Notify, 30, 502, func(o *Op) { o.End = at(45) }),
				op(Create, 40, 201),
				op(Check, 50, 503),
			},
			rows: []Row{{Fault: NoFault, Requests: 6, Errors: 4, LongestStreak: 3, StreakTime: 35 * time.Millisecond,
				RequestsByKind: map[Kind]int{Check: 3, Notify: 1, Redirect: 1, Create: 1},
				ErrorsByKind:   map[Kind]int{Check: 2, Notify: 1, Redirect: 1}}},
			otherCheckers: true,
		},
		{
			name:   "streaks are per row, in start order across kinds",
			faults: []Fault{kill},
			ops: []Op{
				op(Check, 1100, 503),
				op(Check, 500, 503), // outside: does not join the fault's streak
				op(Create, 1200, 503),
				op(Check, 1300, 200),
				op(Redirect, 1400, 503),
				op(Check, 3000, 503),
			},
			rows: []Row{
				{Fault: kill.Name, Requests: 4, Errors: 3, LongestStreak: 2, StreakTime: 101 * time.Millisecond,
					RequestsByKind: map[Kind]int{Check: 2, Create: 1, Redirect: 1}, ErrorsByKind: map[Kind]int{Check: 1, Create: 1, Redirect: 1}},
				{Fault: NoFault, Requests: 2, Errors: 2, LongestStreak: 2, StreakTime: 2501 * time.Millisecond,
					RequestsByKind: map[Kind]int{Check: 2}, ErrorsByKind: map[Kind]int{Check: 2}},
			},
		},
	}, only)
}
