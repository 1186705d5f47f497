package workflow

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/apperr"
)

// FuzzLoopCheck builds step graphs from the fuzzer's bytes (kinds,
// names, jumps of every sort, forward, back, to themselves, to steps that
// do not exist) and holds validation's loop check to an oracle of its own
// here: a definition is accepted only if no cycle of steps passes no wait
// or wait_for, and one refused as a loop has such a cycle. The oracle
// reads the steps' jumps as the engine takes them (advance.go), not
// through validate.go's next, so a jump both forget is the only one it
// cannot catch.
func FuzzLoopCheck(f *testing.F) {
	for _, seed := range [][]byte{
		{3, 0, 3, 1, 0, 0}, {4, 3, 2, 0, 0, 5, 1, 4, 1, 2}, {2, 4, 0, 0, 1, 1}, {5, 2, 1, 9, 3, 0, 0, 7},
		{1, 3, 0, 0, 0}, {6, 0, 3, 5, 2, 1, 4, 3, 4, 2, 0, 3, 1}, {8, 3, 7, 1, 3, 6, 2, 5, 5, 4, 9, 8, 1, 0},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		body := graphDefinition(prog)
		w, err := parseDefinition(context.Background(), "fuzz", json.RawMessage(body), nil)
		cycle := waitFreeCycle(w)
		if err == nil {
			if cycle != nil {
				t.Fatalf("accepted a loop without a wait %v:\n%s", cycle, body)
			}
			return
		}
		ae, ok := err.(*apperr.Error)
		if !ok || ae.Code != apperr.Unprocessable {
			t.Fatalf("refusal %v is not Unprocessable", err)
		}
		for _, fe := range ae.Fields {
			if strings.Contains(fe.Detail, "loop without a wait") && waitFreeCycle(parsedSteps(body)) == nil {
				t.Fatalf("refused as a loop (%s: %s) with none:\n%s", fe.Field, fe.Detail, body)
			}
		}
	})
}

// parsedSteps is the definition's steps as parsed, before validation.
func parsedSteps(body string) Workflow {
	w, _ := parse(json.RawMessage(body))
	return w
}

// graphDefinition writes a definition of 1 to 12 steps read from prog.
func graphDefinition(prog []byte) string {
	at := 0
	next := func() int {
		if at >= len(prog) {
			return 0
		}
		at++
		return int(prog[at-1])
	}
	n := 1 + next()%12
	target := func() string {
		switch k := next() % (n + 2); k {
		case n:
			return "exit"
		case n + 1:
			return "nowhere"
		default:
			return fmt.Sprintf("s%d", k)
		}
	}
	steps := make([]string, n)
	for i := range steps {
		name := fmt.Sprintf(`"name":"s%d",`, i)
		if next()%7 == 6 {
			name = ""
		}
		var kind string
		switch next() % 6 {
		case 0:
			kind = `"send":"otp"`
		case 1:
			kind = `"wait":"1h"`
		case 2:
			kind = `"wait_for":{"event":"e"}`
			if next()%2 == 1 {
				kind = `"wait_for":{"event":"e","timeout":"1h"},"on_timeout":"` + target() + `"`
			}
		case 3:
			var paths []string
			for range 1 + next()%3 {
				paths = append(paths, `{"if":{"k":{"eq":1}},"goto":"`+target()+`"}`)
			}
			kind = `"branch":[` + strings.Join(paths, ",") + `]`
			if next()%2 == 1 {
				kind += `,"else":"` + target() + `"`
			}
		case 4:
			kind = `"split":[{"percent":50,"goto":"` + target() + `"},{"percent":50,"goto":"` + target() + `"}]`
		default:
			kind = `"exit":true`
		}
		steps[i] = "{" + name + kind + "}"
	}
	return `{"trigger":{"event":"start"},"steps":[` + strings.Join(steps, ",") + `]}`
}

// waitFreeCycle returns a cycle of w's steps that passes no wait or
// wait_for, or nil: a depth-first search over the other steps, their
// jumps read as the engine takes them.
func waitFreeCycle(w Workflow) []int {
	pauses := func(i int) bool { k := w.Steps[i].Kind; return k == KindWait || k == KindWaitFor }
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(w.Steps))
	var stack []int
	var visit func(i int) []int
	visit = func(i int) []int {
		state[i] = open
		stack = append(stack, i)
		for _, j := range engineJumps(w, i) {
			if pauses(j) {
				continue
			}
			switch state[j] {
			case open:
				for k, x := range stack {
					if x == j {
						return append([]int(nil), stack[k:]...)
					}
				}
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
		return nil
	}
	for i := range w.Steps {
		if state[i] == unseen && !pauses(i) {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// engineJumps lists the steps the engine may run right after step i
// without pausing at i (advance.go's next and waitEnded, steps.go's
// branch and split): the next step, or a named one; none past the end.
func engineJumps(w Workflow, i int) []int {
	named := func(name string) int {
		for j, st := range w.Steps {
			if st.Name != "" && st.Name == name {
				return j
			}
		}
		return -1
	}
	st := w.Steps[i]
	var to []int
	switch st.Kind {
	case KindExit:
	case KindSplit:
		for _, p := range st.Split {
			if p.Goto != Exit {
				to = append(to, named(p.Goto))
			}
		}
	case KindBranch:
		for _, p := range st.Branch {
			to = append(to, named(p.Goto))
		}
		if st.Else != "" {
			to = append(to, named(st.Else))
		} else {
			to = append(to, i+1)
		}
	case KindWaitFor:
		to = append(to, i+1)
		if st.OnTimeout != "" {
			to = append(to, named(st.OnTimeout))
		}
	default:
		to = append(to, i+1)
	}
	out := to[:0]
	for _, j := range to {
		if j >= 0 && j < len(w.Steps) {
			out = append(out, j)
		}
	}
	return out
}

// TestLoopOracle: FuzzLoopCheck's oracle has teeth: it finds the loops
// validation refuses, and none through a wait.
func TestLoopOracle(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, steps string
		loop        bool
	}{
		{"a branch back", `{"name":"a","send":"otp"},{"branch":[{"if":{"k":{"eq":1}},"goto":"a"}]}`, true},
		{"a split to itself", `{"name":"a","split":[{"percent":50,"goto":"a"},{"percent":50,"goto":"exit"}]}`, true},
		{"an else forward and back", `{"name":"a","branch":[{"if":{"k":{"eq":1}},"goto":"c"}],"else":"b"},{"name":"b","send":"otp"},{"name":"c","branch":[{"if":{"k":{"eq":1}},"goto":"a"}],"else":"a"}`, true},
		{"back through a wait", `{"name":"a","wait":"1h"},{"branch":[{"if":{"k":{"eq":1}},"goto":"a"}]}`, false},
		{"back through a wait_for's timeout", `{"name":"a","wait_for":{"event":"e","timeout":"1h"},"on_timeout":"a"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"trigger":{"event":"start"},"steps":[` + tt.steps + `]}`
			_, err := parseDefinition(t.Context(), "k", json.RawMessage(body), nil)
			if found := waitFreeCycle(parsedSteps(body)) != nil; found != tt.loop || (err != nil) != tt.loop {
				t.Errorf("oracle found a loop: %v, validation refused: %v; want both %v", found, err, tt.loop)
			}
		})
	}
}
