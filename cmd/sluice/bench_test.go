package main

import (
	"strings"
	"testing"
)

// TestBenchCommand runs every default scenario briefly on an in-process
// node and on the bare comparison targets: one row per scenario and
// target, no errors.
func TestBenchCommand(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI(t, nil, "bench", "--requests", "200", "--workers", "4", "--keys", "16", "--links", "5", "--compare", "bare")
	if code != 0 {
		t.Fatalf("sluice bench = %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 {
		t.Fatalf("sluice bench printed %d lines, want a header and 6 rows:\n%s", len(lines), out)
	}
	for _, row := range lines[1:] {
		f := strings.Fields(row)
		if len(f) < 10 || (f[1] != targetSluice && f[1] != targetCompare) || f[3] != "200" || f[4] != "0" {
			t.Errorf("row %q: want 200 OK requests and 0 errors on sluice or compare", row)
		}
	}
	if strings.Contains(out, "first error") {
		t.Errorf("errors reported:\n%s", out)
	}
}

func TestBenchRefusesBadArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown scenario", []string{"bench", "nope"}, `unknown scenario "nope"`},
		{"unbounded", []string{"bench", "--duration", "0"}, "--duration or --requests"},
		{"engines with a server", []string{"bench", "--server", "http://127.0.0.1:1", "--redis-url", "redis://x"}, "in-process node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errs := runCLI(t, nil, tt.args...)
			if code == 0 || !strings.Contains(errs, tt.want) {
				t.Errorf("%v = %d %q, want a failure saying %q", tt.args, code, errs, tt.want)
			}
		})
	}
}
