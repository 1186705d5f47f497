package topology

import (
	"fmt"
	"testing"
	"time"
)

func TestCheckNotifications(t *testing.T) {
	t.Parallel()
	only := func(r Row) Row {
		return Row{Fault: r.Fault, Lost: r.Lost, Duplicated: r.Duplicated, OrderViolations: r.OrderViolations, OTPp99: r.OTPp99, OTPMax: r.OTPMax}
	}
	kill := mkFault("kill -9 node 2", 1000, 2000)
	inFlight := Bounds{InFlight: 2}
	runChecks(t, []checkTest{
		{
			name:   "every notification terminal, delivered once, in order",
			faults: []Fault{kill},
			bounds: inFlight,
			ops: join(
				sent(0, "n1", 1), sent(100, "n2", 2), sent(1100, "n3", 3),
				[]Op{
					notify(20, "n1", 1, func(o *Op) { o.Status = 200 }), // request_id repeated
					notify(200, "", 4, func(o *Op) { o.Status = 503 }),  // refused: nothing promised
					notify(300, "", 5, failed),
					notify(400, "n6", 6, func(o *Op) { o.Channel = "" }), // no receiver watches it
					statusOp("n6", "suppressed"),
				},
			),
			rows: []Row{{Fault: kill.Name}, {Fault: NoFault}},
		},
		{
			name:       "accepted, no status",
			ops:        []Op{notify(0, "n1", 1), deliver(50, "n1")},
			rows:       []Row{{Fault: NoFault, Lost: 1}},
			violations: []string{`notification outside faults: n1 accepted but no status read back`},
		},
		{
			name:       "accepted, status not terminal",
			faults:     []Fault{kill},
			ops:        []Op{notify(1500, "n1", 1), statusOp("n1", "queued"), deliver(1550, "n1")},
			rows:       []Row{{Fault: kill.Name, Lost: 1}, {Fault: NoFault}},
			violations: []string{`notification during "kill -9 node 2": n1 accepted but its webhook status is "queued", not terminal`},
		},
		{
			name:       "a failed status read is no status",
			ops:        []Op{notify(0, "n1", 1), deliver(50, "n1"), op(Status, 90_000, 503, func(o *Op) { o.ID = "n1" })},
			rows:       []Row{{Fault: NoFault, Lost: 1}},
			violations: []string{`n1 accepted but no status read back`},
		},
		{
			name: "a later status read wins",
			ops: []Op{
				notify(0, "n1", 1), deliver(50, "n1"),
				op(Status, 90_000, 200, func(o *Op) { o.ID, o.Channel, o.Final = "n1", "webhook", "sending" }),
				statusOp("n1", "sent"),
			},
			rows: []Row{{Fault: NoFault}},
		},
		{
			name:       "accepted and sent, never delivered",
			ops:        []Op{notify(0, "n1", 1), statusOp("n1", "sent")},
			rows:       []Row{{Fault: NoFault, Lost: 1}},
			violations: []string{`n1 accepted but never delivered on webhook`},
		},
		{
			name: "a delivery without an ID matches by user and seq",
			ops: []Op{notify(0, "n1", 1), statusOp("n1", "sent"),
				op(Deliver, 50, 200, func(o *Op) { o.User, o.Seq, o.Channel = "u", 1, "webhook" })},
			rows: []Row{{Fault: NoFault}},
		},
		{
			name:       "a duplicate outside faults",
			faults:     []Fault{kill},
			bounds:     inFlight,
			ops:        join(sent(0, "n1", 1), []Op{deliver(60, "n1")}),
			rows:       []Row{{Fault: kill.Name}, {Fault: NoFault, Duplicated: 1}},
			violations: []string{`notification outside faults: n1 delivered 2 times on webhook`},
		},
		{
			name:   "duplicates within the jobs in flight during a fault",
			faults: []Fault{kill},
			bounds: inFlight,
			// n1's first copy went out as the node died, its second after
			// the ack wait, long after the fault.
			ops:  join(sent(950, "n1", 1), sent(1100, "n2", 2), []Op{deliver(30_000, "n1"), deliver(1500, "n2")}),
			rows: []Row{{Fault: kill.Name, Duplicated: 2}, {Fault: NoFault}},
		},
		{
			name:   "duplicates past the jobs in flight during a fault",
			faults: []Fault{kill},
			bounds: inFlight,
			ops: join(sent(1000, "n1", 1), sent(1100, "n2", 2),
				[]Op{deliver(1200, "n1"), deliver(1300, "n1"), deliver(1500, "n2")}),
			rows:       []Row{{Fault: kill.Name, Duplicated: 3}, {Fault: NoFault}},
			violations: []string{`notification during "kill -9 node 2": 3 duplicate deliveries, over the bound of 2 in flight`},
		},
		{
			name: "a duplicate of a notification whose answer was lost",
			ops: []Op{notify(0, "", 1, failed),
				op(Deliver, 50, 200, func(o *Op) { o.ID, o.User, o.Seq, o.Channel = "n1", "u", 1, "webhook" }),
				op(Deliver, 70, 200, func(o *Op) { o.ID, o.User, o.Seq, o.Channel = "n1", "u", 1, "webhook" }),
			},
			rows:       []Row{{Fault: NoFault, Duplicated: 1}},
			violations: []string{`n1 delivered 2 times on webhook`},
		},
		{
			name: "an order inversion",
			ops: []Op{
				notify(0, "n1", 1), statusOp("n1", "sent"), deliver(60, "n1"),
				notify(20, "n2", 2), statusOp("n2", "sent"), deliver(40, "n2"),
			},
			rows:       []Row{{Fault: NoFault, OrderViolations: 1}},
			violations: []string{`notification order outside faults: 1 inversions, first: user "u" on webhook (orders) got seq 2 (n2) before seq 1 (n1)`},
		},
		{
			// n1's first attempt failed: n2 overtaking its retry is the
			// documented trade-off, not an inversion.
			name: "a retried notification may be overtaken",
			ops: []Op{
				notify(0, "n1", 1), op(Status, 100_000, 200, func(o *Op) { o.ID, o.Channel, o.Final, o.Attempts = "n1", "webhook", "sent", 2 }), deliver(60, "n1"),
				notify(20, "n2", 2), statusOp("n2", "sent"), deliver(40, "n2"),
			},
			rows: []Row{{Fault: NoFault}},
		},
		{
			name: "a retried later notification still may not pass an earlier one",
			ops: []Op{
				notify(0, "n1", 1), statusOp("n1", "sent"), deliver(60, "n1"),
				notify(20, "n2", 2), op(Status, 100_000, 200, func(o *Op) { o.ID, o.Channel, o.Final, o.Attempts = "n2", "webhook", "sent", 2 }), deliver(40, "n2"),
			},
			rows:       []Row{{Fault: NoFault, OrderViolations: 1}},
			violations: []string{`got seq 2 (n2) before seq 1 (n1)`},
		},
		{
			name: "no order across categories: two queues",
			ops: []Op{
				notify(0, "n1", 1), statusOp("n1", "sent"), deliver(60, "n1"),
				notify(20, "n2", 2, func(o *Op) { o.Category = "critical" }), statusOp("n2", "sent"), deliver(40, "n2"),
			},
			rows: []Row{{Fault: NoFault, OTPp99: 10 * time.Millisecond, OTPMax: 10 * time.Millisecond}},
		},
		{
			name:   "inversions counted by pair, in the fault's row",
			faults: []Fault{kill},
			ops: []Op{
				notify(1000, "n1", 1), statusOp("n1", "sent"), deliver(1300, "n1"),
				notify(1020, "n2", 2), statusOp("n2", "sent"), deliver(1100, "n2"),
				notify(1040, "n3", 3), statusOp("n3", "sent"), deliver(1200, "n3"),
			},
			rows:       []Row{{Fault: kill.Name, OrderViolations: 2}, {Fault: NoFault}},
			violations: []string{`notification order during "kill -9 node 2": 2 inversions`},
		},
		{
			name: "notifications accepted concurrently have no order",
			ops: []Op{
				notify(0, "n1", 1, func(o *Op) { o.End = at(30) }), statusOp("n1", "sent"), deliver(60, "n1"),
				notify(20, "n2", 2), statusOp("n2", "sent"), deliver(40, "n2"),
			},
			rows: []Row{{Fault: NoFault}},
		},
		{
			name: "order is per user and channel",
			ops: []Op{
				notify(0, "n1", 1), statusOp("n1", "sent"), deliver(60, "n1"),
				notify(20, "n2", 1, func(o *Op) { o.User = "v" }), statusOp("n2", "sent"), deliver(40, "n2"),
				notify(40, "n3", 2, func(o *Op) { o.Channel = "email" }), op(Status, 90_000, 200, func(o *Op) { o.ID, o.Channel, o.Final = "n3", "email", "sent" }),
				op(Deliver, 50, 200, func(o *Op) { o.ID, o.Channel = "n3", "email" }),
			},
			rows: []Row{{Fault: NoFault}},
		},
		{
			name:   "OTP p99 per row, critical only",
			faults: []Fault{kill},
			ops: func() []Op {
				var ops []Op
				for i := range 10 { // accepted during the fault: 10 ms to 100 ms
					id := string(rune('a' + i))
					n := notify(1000+i*5, id, i+1, func(o *Op) { o.Category = "critical"; o.End = o.Start })
					ops = append(ops, n, statusOp(id, "sent"), deliver(1000+i*5+(i+1)*10, id))
				}
				ops = append(ops, notify(5000, "late", 11, func(o *Op) { o.Category = "critical"; o.End = o.Start }),
					statusOp("late", "sent"), deliver(5007, "late"))
				ops = append(ops, notify(6000, "order", 12), statusOp("order", "sent"), deliver(9000, "order"))
				return ops
			}(),
			rows: []Row{{Fault: kill.Name, OTPp99: 100 * time.Millisecond, OTPMax: 100 * time.Millisecond},
				{Fault: NoFault, OTPp99: 7 * time.Millisecond, OTPMax: 7 * time.Millisecond}},
		},
		{
			name:   "OTP p99 over its bound during a kill: the row fails, naming the slowest OTP's timeline",
			faults: []Fault{kill},
			bounds: Bounds{OTPp99: OTPBoundP99, OTPMax: OTPBoundMax},
			ops: func() []Op {
				var ops []Op
				for i := range 10 { // accepted during the kill; two of ten wait out a pin
					id := string(rune('a' + i))
					took := 20
					if i >= 8 {
						took = 6000 + i*100
					}
					n := notify(1000+i*5, id, i+1, func(o *Op) { o.Category = "critical"; o.End = o.Start })
					ops = append(ops, n, statusOp(id, "sent"), deliver(1000+i*5+took, id))
				}
				return ops
			}(),
			rows: []Row{{Fault: kill.Name, OTPp99: 6900 * time.Millisecond, OTPMax: 6900 * time.Millisecond}, {Fault: NoFault}},
			violations: []string{`OTP latency during "kill -9 node 2": p99 6.9s over the bound of 5s over 10 OTPs; ` +
				`slowest j (user "u" seq 10) accepted via ? at 2026-12-01T10:00:01.045Z, delivered on webhook at 2026-12-01T10:00:07.945Z, 6.9s later`},
		},
		{
			name:   "one OTP past the maximum fails the row even with the p99 within bound",
			bounds: Bounds{OTPp99: OTPBoundP99, OTPMax: OTPBoundMax},
			ops: func() []Op {
				var ops []Op
				for i := range 200 {
					id := fmt.Sprintf("o%03d", i)
					took := 30
					if i == 0 {
						took = 12_000
					}
					n := notify(i*10, id, i+1, func(o *Op) { o.Category = "critical"; o.End = o.Start; o.User = id })
					ops = append(ops, n, statusOp(id, "sent"), deliver(i*10+took, id))
				}
				return ops
			}(),
			rows:       []Row{{Fault: NoFault, OTPp99: 30 * time.Millisecond, OTPMax: 12 * time.Second}},
			violations: []string{`OTP latency outside faults: slowest 12s over the bound of 10s over 200 OTPs; slowest o000`},
		},
	}, only)
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		name string
		ds   []time.Duration
		q    float64
		want time.Duration
	}{
		{"none", nil, 0.99, 0},
		{"one", ms(5), 0.99, 5 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(seq(100)...), 0.99, 99 * time.Millisecond},
		{"p99 of 200 is the 198th", ms(seq(200)...), 0.99, 198 * time.Millisecond},
		{"p50 of 4 is the 2nd", ms(4, 3, 2, 1), 0.5, 2 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := percentile(tt.ds, tt.q); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.ds, tt.q, got, tt.want)
			}
		})
	}
}

// seq is 1 to n.
func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestTerminal(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"sent", "delivered", "failed", "expired", "dead", "suppressed", "canceled"} {
		if !Terminal(s) {
			t.Errorf("Terminal(%q) = false, want true", s)
		}
	}
	for _, s := range []string{"queued", "sending", "", "accepted"} {
		if Terminal(s) {
			t.Errorf("Terminal(%q) = true, want false", s)
		}
	}
}
