// Package enginetest gives tests the external engines they need: the shared
// PostgreSQL, Redis and NATS named by SLUICE_TEST_POSTGRES_URL,
// SLUICE_TEST_REDIS_URL and SLUICE_TEST_NATS_URL, and private engine
// processes started on spare ports for tests that must stop them.
//
// A test that needs an engine whose variable is unset is skipped on a
// developer's machine and fails when CI=true, so CI never skips silently.
//
// # Ports
//
// Engines that must be told their port on the command line get one from
// ports.go. A port picked by listening on :0 and closing is free a moment,
// then the kernel may give it to any other test's :0 listener or outgoing
// connection, so an engine that is started on it late, or restarted on it
// after a stop, can find it taken. These ports come from below the
// kernel's ephemeral range (ip_local_port_range), which the kernel never
// hands out by itself, and are held by a bound socket that does not listen
// (a connection to it is refused, as to a dead port; nobody else can bind
// it) until the engine is started, and again while it is stopped.
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
