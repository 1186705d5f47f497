// Package enginetest gives tests the external engines they need: the shared
// PostgreSQL, Redis and NATS named by SLUICE_TEST_POSTGRES_URL,
// SLUICE_TEST_REDIS_URL and SLUICE_TEST_NATS_URL, and private engine
// processes started on spare ports for tests that must stop them.
//
// A test that needs an engine whose variable is unset is skipped on a
// developer's machine and fails when CI=true, so CI never skips silently.
package enginetest

import (
	"os"
	"testing"
)

// PostgresURL returns SLUICE_TEST_POSTGRES_URL or skips (fails in CI).
func PostgresURL(t testing.TB) string { return need(t, "SLUICE_TEST_POSTGRES_URL") }

// RedisURL returns SLUICE_TEST_REDIS_URL or skips (fails in CI).
func RedisURL(t testing.TB) string { return need(t, "SLUICE_TEST_REDIS_URL") }

// NATSURL returns SLUICE_TEST_NATS_URL or skips (fails in CI).
func NATSURL(t testing.TB) string { return need(t, "SLUICE_TEST_NATS_URL") }

func need(t testing.TB, name string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not set, and CI=true: this test needs its engine", name)
	}
	t.Skipf("%s is not set: skipping (CI=true turns this into a failure)", name)
	return ""
}
