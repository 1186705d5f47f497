package topology

import (
	"testing"
	"time"
)

func TestCheckRateLimits(t *testing.T) {
	t.Parallel()
	only := func(r Row) Row { return Row{Fault: r.Fault, Overshoot: r.Overshoot} }
	// Redis lost for a second: on 3 nodes a limit of 10 may admit 10 + 3 × 3,
	// and never less than 2 × 10.
	redis := mkFault("redis stopped", 1000, 2000)
	runChecks(t, []checkTest{
		{
			name:  "the limit and no more outside faults",
			nodes: 3,
			ops:   join(checks(10, 0, true, "k"), checks(30, 100, false, "k"), checks(5, 1000, true, "k")),
			rows:  []Row{{Fault: NoFault, Overshoot: 1}},
		},
		{
			name:       "one past the limit outside faults",
			nodes:      3,
			ops:        join(checks(11, 0, true, "k")),
			rows:       []Row{{Fault: NoFault, Overshoot: 1.1}},
			violations: []string{`rate limit outside faults: key "k" window 2026-12-01T10:00:00Z admitted 11 of limit 10 (1.10x), over the bound 10`},
		},
		{
			name:   "twice the limit during a fault is the fail-open allowance",
			nodes:  3,
			faults: []Fault{redis},
			ops:    join(checks(20, 1000, true, "k"), checks(10, 3000, true, "k")),
			rows:   []Row{{Fault: redis.Name, Overshoot: 2}, {Fault: NoFault, Overshoot: 1}},
		},
		{
			name:       "past twice the limit during a fault",
			nodes:      3,
			faults:     []Fault{redis},
			ops:        join(checks(21, 1000, true, "k")),
			rows:       []Row{{Fault: redis.Name, Overshoot: 2.1}, {Fault: NoFault}},
			violations: []string{`rate limit during "redis stopped": key "k" window 2026-12-01T10:00:01Z admitted 21 of limit 10 (2.10x), over the bound 20`},
		},
		{
			name:   "a window overlapping the grace is during the fault",
			nodes:  3,
			faults: []Fault{mkFault("redis stopped", 1000, 1900)},
			bounds: Bounds{FaultGrace: 200 * time.Millisecond},
			ops:    join(checks(15, 2050, true, "k")), // window 2000-3000
			rows:   []Row{{Fault: redis.Name, Overshoot: 1.5}, {Fault: NoFault}},
		},
		{
			name:       "a window after the grace is not",
			nodes:      3,
			faults:     []Fault{mkFault("redis stopped", 1000, 1900)},
			bounds:     Bounds{FaultGrace: 50 * time.Millisecond},
			ops:        join(checks(15, 2050, true, "k")),
			rows:       []Row{{Fault: redis.Name}, {Fault: NoFault, Overshoot: 1.5}},
			violations: []string{`rate limit outside faults: key "k" window 2026-12-01T10:00:02Z admitted 15 of limit 10`},
		},
		{
			name:       "a window after the fault is held to the limit",
			nodes:      3,
			faults:     []Fault{redis},
			ops:        join(checks(15, 3000, true, "k")),
			rows:       []Row{{Fault: redis.Name}, {Fault: NoFault, Overshoot: 1.5}},
			violations: []string{`rate limit outside faults: key "k"`},
		},
		{
			name:       "each key of a multi-key check counts once",
			nodes:      3,
			ops:        join(checks(10, 0, true, "a", "b", "a"), checks(1, 50, true, "b")),
			rows:       []Row{{Fault: NoFault, Overshoot: 1.1}},
			violations: []string{`key "b" window 2026-12-01T10:00:00Z admitted 11 of limit 10`},
		},
		{
			name:       "keys and windows are counted apart",
			nodes:      3,
			ops:        join(checks(10, 0, true, "a"), checks(10, 0, true, "b"), checks(10, 1000, true, "a"), checks(11, 2000, true, "a")),
			rows:       []Row{{Fault: NoFault, Overshoot: 1.1}},
			violations: []string{`key "a" window 2026-12-01T10:00:02Z admitted 11`},
		},
		{
			// Redis lost while a node is killed and restarted: the
			// restarted node's local limiter starts at 0, one more share.
			name:   "a node restarted during the outage adds its share once more",
			nodes:  3,
			faults: []Fault{redis, {Name: "kill -9 node 1", Start: at(1010), End: at(1500), Restarts: 1}},
			ops:    join(checks(23, 1000, true, "k")),
			rows:   []Row{{Fault: redis.Name, Overshoot: 2.3}, {Fault: "kill -9 node 1", Overshoot: 2.3}, {Fault: NoFault}},
		},
		{
			name:       "past that share once more",
			nodes:      3,
			faults:     []Fault{redis, {Name: "kill -9 node 1", Start: at(1010), End: at(1500), Restarts: 1}},
			ops:        join(checks(24, 1000, true, "k")),
			rows:       []Row{{Fault: redis.Name, Overshoot: 2.4}, {Fault: "kill -9 node 1", Overshoot: 2.4}, {Fault: NoFault}},
			violations: []string{`over the bound 23`, `over the bound 23`},
		},
		{
			name:   "a small limit on many nodes admits at least one per node",
			nodes:  5,
			faults: []Fault{redis},
			ops: func() []Op {
				ops := checks(7, 1000, true, "k") // 2 in Redis, then 1 on each of 5 nodes
				for i := range ops {
					ops[i].Limit = 2
				}
				return ops
			}(),
			rows: []Row{{Fault: redis.Name, Overshoot: 3.5}, {Fault: NoFault}},
		},
	}, only)
}
