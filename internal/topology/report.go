package topology

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// NoFault is the name of the row for operations outside every fault.
const NoFault = "none"

// Summarize holds h to its promises within b and returns a row per fault,
// in the order of h.Faults, then a row named [NoFault] for what happened
// outside every fault. An operation belongs to every fault whose interval,
// widened by b.FaultGrace on each side, contains its Start (faults may
// overlap, so rows need not add up), and to the NoFault row when it belongs
// to none.
//
// Each concern has its own checker (check_ratelimit.go, check_notify.go,
// check_links.go, check_availability.go); each fills its columns of every
// row and adds a sentence to Violations for each broken promise. The
// matching rules are in each checker's doc comment.
//
// Summarize reads a snapshot of h taken under its lock: it is safe to call
// while operations are still being added, which it then does not see.
func Summarize(h *History, b Bounds) Summary {
	r := newRun(h, b)
	for _, check := range []func(*run){
		checkAvailability,
		checkRateLimits,
		checkNotifications,
		checkLinks,
	} {
		check(r)
	}
	return Summary{Seed: r.seed, Rows: r.rows, Violations: r.violations}
}

// run is one Summarize call: a snapshot of the history, sorted by kind,
// and the rows and violations the checkers fill.
type run struct {
	seed   int64
	nodes  int
	faults []Fault
	bounds Bounds
	ops    map[Kind][]Op // each in start order

	rows       []Row // one per fault, then NoFault
	violations []string
}

func newRun(h *History, b Bounds) *run {
	h.mu.Lock()
	r := &run{
		seed:   h.Seed,
		nodes:  h.Nodes,
		faults: slices.Clone(h.Faults),
		bounds: b,
		ops:    make(map[Kind][]Op),
	}
	for _, o := range h.Ops {
		r.ops[o.Kind] = append(r.ops[o.Kind], o)
	}
	h.mu.Unlock()
	for _, ops := range r.ops {
		slices.SortStableFunc(ops, func(a, b Op) int { return a.Start.Compare(b.Start) })
	}
	for _, f := range r.faults {
		r.rows = append(r.rows, Row{Fault: f.Name})
	}
	r.rows = append(r.rows, Row{Fault: NoFault})
	r.violations = []string{} // JSON shows [] for a pass, not null
	return r
}

// none is the index of the NoFault row.
func (r *run) none() int { return len(r.faults) }

// rowsAt returns the rows an operation starting at one of times belongs
// to: every fault whose widened interval contains one of them, or the
// NoFault row when none does. The result is in row order, without repeats.
func (r *run) rowsAt(times ...time.Time) []int {
	var out []int
	for i, f := range r.faults {
		for _, t := range times {
			if f.During(t, r.bounds.FaultGrace) {
				out = append(out, i)
				break
			}
		}
	}
	if len(out) == 0 {
		out = append(out, r.none())
	}
	return out
}

// rowsOverlapping returns the rows whose widened fault overlaps [from, to],
// or the NoFault row when none does.
func (r *run) rowsOverlapping(from, to time.Time) []int {
	var out []int
	g := r.bounds.FaultGrace
	for i, f := range r.faults {
		if !to.Before(f.Start.Add(-g)) && !from.After(f.End.Add(g)) {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		out = append(out, r.none())
	}
	return out
}

// violate records a broken promise.
func (r *run) violate(format string, args ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// where names a row for a violation: `during "kill -9 node 2"` or
// `outside faults`.
func (r *run) where(row int) string {
	if row == r.none() {
		return "outside faults"
	}
	return fmt.Sprintf("during %q", r.rows[row].Fault)
}

// sortedKeys returns m's keys in order, for deterministic reports.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// WriteTable writes s as a Markdown table, a row per fault: requests,
// errors (and their share), the errors by kind of request (see
// errorsByKind), the longest error streak (count and ms), overshoot, lost,
// duplicated, order violations, OTP p99, bad redirects and missing clicks;
// then the violations as a list, or "no violations".
func (s Summary) WriteTable(w io.Writer) error {
	var b strings.Builder
	b.WriteString("| fault | requests | errors | errors by kind | longest error streak | overshoot | lost | duplicated | order violations | OTP p99 | bad redirects | missing clicks |\n")
	b.WriteString("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, row := range s.Rows {
		fmt.Fprintf(&b, "| %s | %d | %d (%s) | %s | %d (%d ms) | %.2f | %d | %d | %d | %d ms | %d | %d |\n",
			strings.ReplaceAll(row.Fault, "|", `\|`), row.Requests, row.Errors, percent(row.Errors, row.Requests),
			errorsByKind(row), row.LongestStreak, row.StreakTime.Milliseconds(), row.Overshoot,
			row.Lost, row.Duplicated, row.OrderViolations, row.OTPp99.Milliseconds(),
			row.BadRedirects, row.MissingClicks)
	}
	if len(s.Violations) == 0 {
		b.WriteString("\nno violations\n")
	} else {
		fmt.Fprintf(&b, "\n%d violations:\n", len(s.Violations))
		for _, v := range s.Violations {
			fmt.Fprintf(&b, "- %s\n", v)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// percent is part of whole as "1.25%" (0.00% of nothing).
func percent(part, whole int) string {
	if whole == 0 {
		return "0.00%"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(part)/float64(whole))
}

// errorsByKind writes a row's errors per kind of request, in clientKinds
// order, only the kinds that had errors: "notify 12/300 (4.00%), create
// 4/30 (13.33%)", or "-" for none.
func errorsByKind(row Row) string {
	var parts []string
	for _, k := range clientKinds {
		if n := row.ErrorsByKind[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d (%s)", k, n, row.RequestsByKind[k], percent(n, row.RequestsByKind[k])))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
