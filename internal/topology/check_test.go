package topology

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// t0 is the start of every test history; at(ms) is ms milliseconds later.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func mkFault(name string, fromMS, toMS int) Fault {
	return Fault{Name: name, Start: at(fromMS), End: at(toMS)}
}

// op is an operation of kind k started at ms and answered 1 ms later with
// status, changed by each of with.
func op(k Kind, ms, status int, with ...func(*Op)) Op {
	o := Op{Kind: k, Start: at(ms), End: at(ms + 1), Status: status}
	for _, f := range with {
		f(&o)
	}
	return o
}

// failed makes an op a client-side failure with no answer.
func failed(o *Op) { o.Status, o.Err = 0, "connection refused" }

// checks are n checks of keys at limit 10, one a millisecond from ms, in
// the 1 s window of ms.
func checks(n, ms int, allowed bool, keys ...string) []Op {
	var out []Op
	for i := range n {
		out = append(out, op(Check, ms+i, 200, func(o *Op) {
			o.Keys, o.Limit, o.Allowed = keys, 10, allowed
			o.Window = at(ms).Truncate(time.Second)
		}))
	}
	return out
}

// notify is notification id (user u, seq) accepted with a 202 on the
// webhook channel, taking 10 ms from ms.
func notify(ms int, id string, seq int, with ...func(*Op)) Op {
	o := op(Notify, ms, 202, func(o *Op) {
		o.End = at(ms + 10)
		o.ID, o.User, o.Seq, o.Channel, o.Category = id, "u", seq, "webhook", "orders"
	})
	for _, f := range with {
		f(&o)
	}
	return o
}

// status is the final status of id on the webhook channel, read after the
// run.
func statusOp(id, final string) Op {
	return op(Status, 100_000, 200, func(o *Op) { o.ID, o.Channel, o.Final = id, "webhook", final })
}

// deliver is id seen on the webhook receiver at ms.
func deliver(ms int, id string) Op {
	return op(Deliver, ms, 200, func(o *Op) { o.ID, o.Channel = id, "webhook" })
}

// sent is a notification accepted at ms, sent, and delivered at ms+50.
func sent(ms int, id string, seq int) []Op {
	return []Op{notify(ms, id, seq), statusOp(id, "sent"), deliver(ms+50, id)}
}

func create(ms int, code string) Op {
	return op(Create, ms, 201, func(o *Op) { o.Code = code })
}

func redirect(ms int, code string, status int, with ...func(*Op)) Op {
	return op(Redirect, ms, status, append([]func(*Op){func(o *Op) { o.Code = code }}, with...)...)
}

func redirects(n, ms int, code string) []Op {
	var out []Op
	for i := range n {
		out = append(out, redirect(ms+i, code, 302))
	}
	return out
}

func clicks(code string, count int64) Op {
	return op(Clicks, 100_000, 200, func(o *Op) { o.Code, o.Count = code, count })
}

// join concatenates groups of operations.
func join(groups ...[]Op) []Op {
	var out []Op
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// checkTest is one history a checker is held to.
type checkTest struct {
	name   string
	nodes  int
	faults []Fault
	ops    []Op
	bounds Bounds
	// rows are the rows wanted, faults then "none", projected on the
	// checker's columns; nil skips the comparison.
	rows []Row
	// violations are substrings of the violations wanted, one each; none
	// means the history passes.
	violations []string
	// otherCheckers skips the violations check: the history is made for
	// one checker's columns, and the others may object to it.
	otherCheckers bool
}

// run summarizes each test's history and compares the projected rows and
// the violations.
func runChecks(t *testing.T, tests []checkTest, project func(Row) Row) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &History{Seed: 1, Nodes: tt.nodes}
			for _, f := range tt.faults {
				h.AddFault(f)
			}
			for _, o := range tt.ops {
				h.Add(o)
			}
			s := Summarize(h, tt.bounds)

			if tt.rows != nil {
				got := make([]Row, len(s.Rows))
				for i, r := range s.Rows {
					got[i] = project(r)
				}
				if !reflect.DeepEqual(got, tt.rows) {
					t.Errorf("Summarize rows =\n%s\nwant\n%s", rowsString(got), rowsString(tt.rows))
				}
			}
			if !tt.otherCheckers && !violationsMatch(s.Violations, tt.violations) {
				t.Errorf("Summarize violations =\n%s\nwant one each containing\n%s",
					strings.Join(s.Violations, "\n"), strings.Join(tt.violations, "\n"))
			}
		})
	}
}

func rowsString(rows []Row) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "  %+v\n", r)
	}
	return b.String()
}

// violationsMatch reports whether got has one violation per substring of
// want, each containing it, in any order.
func violationsMatch(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && strings.Contains(g, w) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func TestFaultMembershipWithGrace(t *testing.T) {
	t.Parallel()
	grace := Bounds{FaultGrace: 100 * time.Millisecond}
	kill, slow := mkFault("kill", 1000, 2000), mkFault("slow", 1900, 3000)
	only := func(r Row) Row { return Row{Fault: r.Fault, Requests: r.Requests} }
	runChecks(t, []checkTest{
		{
			name:   "an op belongs to a fault widened by the grace",
			faults: []Fault{kill},
			bounds: grace,
			ops: []Op{
				op(Check, 899, 200), // before the grace
				op(Check, 900, 200), // first instant of the widened fault
				op(Check, 1500, 200),
				op(Check, 2100, 200),       // last instant
				op(Check, 2101, 200),       // after
				op(Status, 1500, 200),      // not a client request
				op(Deliver, 1500, 200),     // nor a delivery
				op(Clicks, 1500, 200),      // nor a read after the run
				op(Notify, 1000, 202),      // every client kind counts
				op(Redirect, 1000, 302),    //
				op(Create, 1000, 201),      //
				op(Check, 1000, 0, failed), // failed ops count too
			},
			rows:          []Row{{Fault: "kill", Requests: 7}, {Fault: NoFault, Requests: 2}},
			otherCheckers: true,
		},
		{
			name:   "an op in two overlapping faults counts in both",
			faults: []Fault{kill, slow},
			bounds: grace,
			ops:    []Op{op(Check, 1950, 200), op(Check, 1000, 200), op(Check, 3050, 200), op(Check, 5000, 200)},
			rows:   []Row{{Fault: "kill", Requests: 2}, {Fault: "slow", Requests: 2}, {Fault: NoFault, Requests: 1}},
		},
		{
			name: "no faults: everything is none",
			ops:  []Op{op(Check, 1, 200), op(Check, 2, 200)},
			rows: []Row{{Fault: NoFault, Requests: 2}},
		},
	}, only)
}

func TestSummaryIsDeterministic(t *testing.T) {
	t.Parallel()
	h := &History{Nodes: 3}
	h.AddFault(mkFault("kill -9 node 2", 1000, 2000))
	for _, o := range join(checks(25, 1000, true, "a", "b"), checks(12, 5000, true, "c"),
		[]Op{notify(0, "n1", 1), deliver(10, "n1"), deliver(20, "n1")}) {
		h.Add(o)
	}
	first := Summarize(h, Bounds{})
	for range 5 {
		if again := Summarize(h, Bounds{}); !reflect.DeepEqual(again, first) {
			t.Fatalf("Summarize = %+v, then %+v", first, again)
		}
	}
}
