package main

import (
	"strings"
	"testing"
)

// TestErrorsHaveOnePrefix: a server's refusal is printed once prefixed,
// "sluice links: 404 Not Found: ...", not "sluice links: sluice: 404 ...".
func TestErrorsHaveOnePrefix(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	code, _, errs := runCLI(t, map[string]string{"SLUICE_SERVER": n.httpURL}, "links", "get", "nope")
	if code != exitRefused || !strings.HasPrefix(errs, "sluice links: 404 ") || strings.Count(errs, "sluice") != 1 {
		t.Errorf("links get of an unknown code = %d %q, want one prefix then the status", code, errs)
	}
}
