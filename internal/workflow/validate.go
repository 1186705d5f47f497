package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Limits on a definition and on an event.
const (
	MaxDefinitionBytes = 64 << 10 // a definition's JSON
	MaxSteps           = 50       // steps in a definition
	MaxKeyBytes        = 64       // a workflow's key, a step's name
	MaxEventNameBytes  = 128      // an event's name
	MaxEventDataBytes  = 32 << 10 // an event's data
	MaxBatch           = 1000     // events in one IngestBatch
	// MaxRunSteps is how many steps one run may execute: past it the run
	// fails ("too many steps"), a guard beside validation's loop check.
	MaxRunSteps = 1000

	maxWait        = 365 * 24 * time.Hour
	maxBranchPaths = 5
	maxSplitPaths  = 10
	maxMatchKeys   = 20
	maxInValues    = 100
	maxPathBytes   = 128
)

// validate checks w whole: its key, its trigger, its steps' names and
// jumps, loops without a wait, and (through templates) the types its
// sends name. It adds to p; errors other than bad fields (a store down)
// are returned.
func validate(ctx context.Context, w Workflow, templates Templates, p *problems) error {
	if msg := checkWorkflowKey(w.Key); msg != "" {
		p.add("key", "%s", msg)
	}
	if w.Trigger.Event != "" {
		if msg := checkEventName(w.Trigger.Event); msg != "" {
			p.add("trigger.event", "%s", msg)
		}
	} else if !hasField(*p, "trigger") && !hasField(*p, "definition") {
		p.add("trigger.event", "is required")
	}
	names := map[string]int{}
	for i, st := range w.Steps {
		if st.Name == "" {
			continue
		}
		f := fmt.Sprintf("steps[%d].name", i)
		switch {
		case !validName(st.Name):
			p.add(f, "must be 1 to %d of a-z, 0-9, _ and -", MaxKeyBytes)
		case st.Name == Exit:
			p.add(f, "%q is reserved (a split's goto that ends the run)", Exit)
		default:
			if j, ok := names[st.Name]; ok {
				p.add(f, "is also the name of steps[%d]", j)
			} else {
				names[st.Name] = i
			}
		}
	}
	target := func(field, name string, exitOK bool) {
		if name == "" {
			p.add(field, "must name a step")
		} else if _, ok := names[name]; !ok && !(exitOK && name == Exit) {
			p.add(field, "names no step (%q)", name)
		}
	}
	for i, st := range w.Steps {
		f := fmt.Sprintf("steps[%d]", i)
		switch st.Kind {
		case KindWaitFor:
			if st.OnTimeout != "" {
				target(f+".on_timeout", st.OnTimeout, false)
			}
			if st.WaitFor != nil && st.OnTimeout != "" && st.WaitFor.Timeout == 0 {
				p.add(f+".on_timeout", "needs a wait_for.timeout")
			}
		case KindBranch:
			for j, b := range st.Branch {
				target(fmt.Sprintf("%s.branch[%d].goto", f, j), b.Goto, false)
			}
			if st.Else != "" {
				target(f+".else", st.Else, false)
			}
		case KindSplit:
			for j, sp := range st.Split {
				target(fmt.Sprintf("%s.split[%d].goto", f, j), sp.Goto, true)
			}
		}
	}
	if len(*p) == 0 {
		loops(w, p)
	}
	return checkTypes(ctx, w, templates, p)
}

// checkTypes asks templates about every send's type.
func checkTypes(ctx context.Context, w Workflow, templates Templates, p *problems) error {
	if templates == nil {
		return nil
	}
	known := map[string]bool{}
	for i, st := range w.Steps {
		if st.Send == nil || st.Send.Type == "" {
			continue
		}
		ok, seen := known[st.Send.Type]
		if !seen {
			_, err := templates.Template(ctx, st.Send.Type)
			switch {
			case err == nil:
				ok = true
			case apperr.Is(err, apperr.NotFound):
			default:
				return fmt.Errorf("look up notification type %q: %w", st.Send.Type, err)
			}
			known[st.Send.Type] = ok
		}
		if !ok {
			f := fmt.Sprintf("steps[%d].send", i)
			if !st.Send.short {
				f += ".type"
			}
			p.add(f, "unknown notification type %q", st.Send.Type)
		}
	}
	return nil
}

// next returns the steps i may go to, and for each jump the field that
// names it ("" for falling through to the next step).
func next(w Workflow, i int) (to []int, fields []string) {
	st, f := w.Steps[i], fmt.Sprintf("steps[%d]", i)
	add := func(j int, field string) {
		if j >= 0 && j < len(w.Steps) {
			to, fields = append(to, j), append(fields, field)
		}
	}
	switch st.Kind {
	case KindExit:
	case KindSplit:
		for k, sp := range st.Split {
			add(w.index(sp.Goto), fmt.Sprintf("%s.split[%d].goto", f, k))
		}
	case KindBranch:
		for k, b := range st.Branch {
			add(w.index(b.Goto), fmt.Sprintf("%s.branch[%d].goto", f, k))
		}
		if st.Else != "" {
			add(w.index(st.Else), f+".else")
		} else {
			add(i+1, "")
		}
	case KindWaitFor:
		add(i+1, "")
		if st.OnTimeout != "" {
			add(w.index(st.OnTimeout), f+".on_timeout")
		}
	default:
		add(i+1, "")
	}
	return to, fields
}

// loops reports every jump back that closes a loop through no wait or
// wait_for step: a run would go round it without pause. Every loop has a
// jump to a step at or before its own, so checking those suffices.
func loops(w Workflow, p *problems) {
	waits := func(i int) bool { k := w.Steps[i].Kind; return k == KindWait || k == KindWaitFor }
	for s := range w.Steps {
		if waits(s) {
			continue
		}
		to, fields := next(w, s)
		for k, t := range to {
			if t > s || waits(t) {
				continue
			}
			if path := reaches(w, t, s, waits); path != nil {
				names := make([]string, len(path))
				for i, x := range path {
					names[i] = stepLabel(w.Steps[x], x)
				}
				p.add(fields[k], "closes a loop without a wait (%s); put a wait or wait_for in it", strings.Join(append(names, names[0]), " -> "))
			}
		}
	}
}

// reaches returns a path of steps from a to b that passes no step skip
// holds for, or nil.
func reaches(w Workflow, a, b int, skip func(int) bool) []int {
	prev := map[int]int{a: -1}
	queue := []int{a}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		if x == b {
			var path []int
			for ; x != -1; x = prev[x] {
				path = append([]int{x}, path...)
			}
			return path
		}
		to, _ := next(w, x)
		for _, y := range to {
			if _, seen := prev[y]; !seen && !skip(y) {
				prev[y] = x
				queue = append(queue, y)
			}
		}
	}
	return nil
}

// stepLabel names a step in messages and metrics: its name, or its index.
func stepLabel(st Step, i int) string {
	if st.Name != "" {
		return st.Name
	}
	return strconv.Itoa(i)
}

func hasField(p problems, prefix string) bool {
	for _, e := range p {
		if strings.HasPrefix(e.Field, prefix) {
			return true
		}
	}
	return false
}

// checkWorkflowKey says what is wrong with a workflow key, or "".
func checkWorkflowKey(key string) string {
	if key == "" || len(key) > MaxKeyBytes {
		return fmt.Sprintf("must be 1 to %d characters", MaxKeyBytes)
	}
	for _, c := range key {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return "must hold only a-z, 0-9, '.', '_' and '-'"
		}
	}
	return ""
}

// validName reports whether s is a step name: 1-64 of a-z, 0-9, _ and -.
func validName(s string) bool {
	if s == "" || len(s) > MaxKeyBytes {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// checkEventName says what is wrong with an event name, or "".
func checkEventName(s string) string {
	if s == "" || len(s) > MaxEventNameBytes {
		return fmt.Sprintf("must be 1 to %d characters", MaxEventNameBytes)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._:-", c)) {
			return "must hold only A-Z, a-z, 0-9, '.', '_', ':' and '-'"
		}
	}
	return ""
}

// checkPath says what is wrong with a dotted path into JSON data, or "".
func checkPath(s string) string {
	if s == "" || len(s) > maxPathBytes {
		return fmt.Sprintf("must be a key or dotted path of 1 to %d characters", maxPathBytes)
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" {
			return "must not hold an empty part (\"a..b\", a leading or trailing dot)"
		}
	}
	return ""
}

// checkKey says what is wrong with a branch condition's key: a data path
// or "user.<attribute path>", or "".
func checkKey(s string) string {
	if s == "user" {
		return "must name an attribute: user.<attribute>"
	}
	return checkPath(s)
}

// parseClock reads "HH:MM".
func parseClock(s string) (hour, minute int, err error) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, 0, fmt.Errorf("%q is not HH:MM", s)
	}
	return t.Hour(), t.Minute(), nil
}

// parseDefinition reads and validates a whole definition for key.
func parseDefinition(ctx context.Context, key string, body json.RawMessage, templates Templates) (Workflow, error) {
	w, p := parse(body)
	w.Key = key
	if err := validate(ctx, w, templates, &p); err != nil {
		return Workflow{}, err
	}
	if err := apperr.Fields(apperr.Unprocessable, "the workflow definition is invalid", p); err != nil {
		return Workflow{}, err
	}
	return w, nil
}
