// Package e2e tests the sluice binary end to end, as separate processes:
// a node killed with SIGKILL and restarted on its data, several nodes on
// shared engines (PostgreSQL, NATS, a Redis cluster), and the gRPC tools a
// deployment points at a node. It holds no code but its tests, which need
// nothing of package main: they build ./cmd/sluice and talk to it over
// HTTP and gRPC.
package e2e
