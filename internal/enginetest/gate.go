package enginetest

import (
	"os"
	"testing"
)

// Faults skips the test unless SLUICE_TEST_FAULTS=1. It marks the long
// tests that run several processes and break them (chaos, failover,
// cluster, HAProxy, multi-node load): `make test-faults` runs them, and so
// does CI (.ci/run), so the README's test command stays fast without CI
// proving less. Call it first in the test, before any t.Parallel.
//
// .ci/faults finds the tests to run by this call: it must be a line of
// its own inside the Test function, `enginetest.Faults(t)`.
func Faults(t testing.TB) {
	t.Helper()
	gate(t, "SLUICE_TEST_FAULTS", "a multi-process fault test (make test-faults)")
}

// Deploy skips the test unless SLUICE_TEST_DEPLOY=1. It marks the
// deployment recipe tests that build tools or release binaries (Helm from
// source, the Dockerfile's static build): `make test-deploy` runs them,
// and so does CI (.ci/run).
func Deploy(t testing.TB) {
	t.Helper()
	gate(t, "SLUICE_TEST_DEPLOY", "a deployment recipe test that builds tools (make test-deploy)")
}

func gate(t testing.TB, name, what string) {
	t.Helper()
	if os.Getenv(name) == "1" {
		return
	}
	t.Skipf("%s: set %s=1 to run it", what, name)
}
