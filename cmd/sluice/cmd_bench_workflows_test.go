package main

import (
	"slices"
	"strings"
	"testing"
)

// TestBenchWorkflows runs the workflow scenarios small on an in-process
// node: a row each, no errors, every cart run completed and every deadline
// run timed out.
func TestBenchWorkflows(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI(t, nil, "bench", "--requests", "40", "--workers", "4", "--waiting-runs", "150",
		"--resume-rate", "100", "--cart-users", "120", "events", "workflow-resume", "cart")
	if code != 0 {
		t.Fatalf("sluice bench = %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	ok := map[string]string{}
	var got []string
	for _, row := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Fields(row)
		if len(f) < 10 {
			t.Fatalf("row %q is not a table row:\n%s", row, out)
		}
		got = append(got, f[0])
		ok[f[0]] = f[3]
		if f[4] != "0" {
			t.Errorf("row %q: want 0 errors", row)
		}
	}
	want := []string{"events-accept", "events-runs", "resume-fill", "resume-event", "resume-latency", "resume-deadline",
		"cart-start", "cart-order", "cart-runs"}
	if !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v\n%s", got, want, out)
	}
	for name, n := range map[string]string{"events-accept": "40", "events-runs": "40", "resume-fill": "150", "resume-event": "40",
		"resume-latency": "40", "resume-deadline": "100", "cart-start": "120", "cart-runs": "120"} {
		if ok[name] != n {
			t.Errorf("%s OK = %s, want %s\n%s", name, ok[name], n, out)
		}
	}
}

func TestBenchWorkflowsRefusesBadRate(t *testing.T) {
	t.Parallel()
	code, _, errs := runCLI(t, nil, "bench", "--resume-rate", "0", "workflow-resume")
	if code == 0 || !strings.Contains(errs, "--resume-rate") {
		t.Errorf("bench --resume-rate 0 = %d %q, want a failure naming --resume-rate", code, errs)
	}
}
