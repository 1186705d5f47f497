package topology

import "testing"

func TestCheckLinks(t *testing.T) {
	t.Parallel()
	only := func(r Row) Row {
		return Row{Fault: r.Fault, BadRedirects: r.BadRedirects, MissingClicks: r.MissingClicks}
	}
	kill := mkFault("kill -9 node 2", 1000, 2000)
	pg := mkFault("postgres stopped", 3000, 4000)
	loss := Bounds{ClickLoss: 5}
	runChecks(t, []checkTest{
		{
			name:   "every redirect of a live code is a 302, every click counted",
			faults: []Fault{kill},
			bounds: loss,
			ops: join(
				[]Op{create(0, "abc"), redirect(0, "abc", 404)}, // before the link existed
				redirects(3, 10, "abc"),
				redirects(3, 1100, "abc"),
				[]Op{
					redirect(20, "nope", 404), // never created
					redirect(30, "gone", 503), // its creation failed
					op(Create, 25, 503, func(o *Op) { o.Code = "gone" }),
					op(Create, 26, 409, func(o *Op) { o.Code = "taken" }),
					redirect(31, "taken", 404), // a 409 is not a creation
					create(40, "del"), redirect(50, "del", 302),
					op(Delete, 60, 204, func(o *Op) { o.Code = "del" }),
					redirect(70, "del", 404), // deleted
					redirect(80, "del", 302), // within the delete's reach
					clicks("abc", 7),         // one more than seen: a redirect whose answer was lost
					clicks("del", 2),
				},
			),
			rows: []Row{{Fault: kill.Name}, {Fault: NoFault}},
		},
		{
			name:       "a redirect answered 503",
			faults:     []Fault{pg},
			ops:        []Op{create(0, "abc"), redirect(100, "abc", 302), redirect(3500, "abc", 503), redirect(3600, "abc", 503)},
			rows:       []Row{{Fault: pg.Name, BadRedirects: 2}, {Fault: NoFault}},
			violations: []string{`links during "postgres stopped": 2 redirects of existing codes not answered 302, first: abc answered 503`},
		},
		{
			name:       "a redirect with no answer",
			ops:        []Op{create(0, "abc"), redirect(100, "abc", 0, failed)},
			rows:       []Row{{Fault: NoFault, BadRedirects: 1}},
			violations: []string{`first: abc answered no answer (connection refused)`},
		},
		{
			name:       "a live code answered 404",
			ops:        []Op{create(0, "abc"), redirect(100, "abc", 404)},
			rows:       []Row{{Fault: NoFault, BadRedirects: 1}},
			violations: []string{`first: abc answered 404`},
		},
		{
			name:   "clicks missing within one kill's loss",
			faults: []Fault{kill, pg},
			bounds: loss,
			ops:    join([]Op{create(0, "abc")}, redirects(10, 100, "abc"), redirects(10, 1500, "abc"), []Op{clicks("abc", 15)}),
			rows:   []Row{{Fault: kill.Name, MissingClicks: 5}, {Fault: pg.Name}, {Fault: NoFault}},
		},
		{
			name:       "clicks missing beyond one kill's loss",
			faults:     []Fault{kill, pg},
			bounds:     loss,
			ops:        join([]Op{create(0, "abc")}, redirects(10, 100, "abc"), redirects(10, 1500, "abc"), []Op{clicks("abc", 14)}),
			rows:       []Row{{Fault: kill.Name, MissingClicks: 6}, {Fault: pg.Name}, {Fault: NoFault}},
			violations: []string{`clicks of abc: 14 counted of 20 redirects answered 302, 6 missing (during "kill -9 node 2"), over the allowance 5 (5 per kill × 1 kills)`},
		},
		{
			name:       "no kill, no clicks may go missing",
			faults:     []Fault{pg},
			bounds:     loss,
			ops:        join([]Op{create(0, "abc")}, redirects(10, 100, "abc"), redirects(10, 3100, "abc"), []Op{clicks("abc", 19)}),
			rows:       []Row{{Fault: pg.Name, MissingClicks: 1}, {Fault: NoFault, MissingClicks: 1}},
			violations: []string{`clicks of abc: 19 counted of 20 redirects answered 302, 1 missing (during "postgres stopped", outside faults), over the allowance 0 (5 per kill × 0 kills)`},
		},
		{
			name:   "a failed clicks read is not judged",
			bounds: loss,
			ops:    join([]Op{create(0, "abc")}, redirects(10, 100, "abc"), []Op{op(Clicks, 90_000, 503, func(o *Op) { o.Code = "abc" })}),
			rows:   []Row{{Fault: NoFault}},
		},
	}, only)
}
