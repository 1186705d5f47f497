package main

import (
	"strings"
	"testing"
)

// TestVersionSaysNothingItCannotKnow: a test binary carries no VCS
// stamp, so `sluice version` must not claim the checkout was unmodified.
func TestVersionSaysNothingItCannotKnow(t *testing.T) {
	t.Parallel()
	if b := readBuild(); b.VCS {
		t.Skip("this binary carries VCS information")
	}
	code, out, errs := runCLI(t, nil, "version")
	if code != 0 || strings.Contains(out, "modified") || !strings.Contains(out, "revision: unknown") {
		t.Errorf("sluice version = %d %q %q, want the revision unknown and no modified line", code, out, errs)
	}
}
