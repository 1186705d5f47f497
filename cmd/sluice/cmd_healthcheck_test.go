package main

import (
	"strings"
	"testing"
)

func TestLoopbackAddr(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, in, want string }{
		{"every IPv4 address", "0.0.0.0:8080", "127.0.0.1:8080"},
		{"no host", ":8080", "127.0.0.1:8080"},
		{"every IPv6 address", "[::]:8080", "[::1]:8080"},
		{"a named address", "10.0.0.5:8080", "10.0.0.5:8080"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := loopbackAddr(tt.in); got != tt.want {
				t.Errorf("loopbackAddr(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestHealthcheckCommand: `sluice healthcheck` exits 0 against a ready
// node and 1 when nothing listens.
func TestHealthcheckCommand(t *testing.T) {
	t.Parallel()
	n := startNode(t, testConfig(t))
	addr := strings.TrimPrefix(n.httpURL, "http://")
	for _, args := range [][]string{{"healthcheck", "--http-addr", addr}, {"healthcheck", "--live", "--http-addr", addr}} {
		if code, out, errOut := runCLI(t, nil, args...); code != 0 || !strings.Contains(out, "200 OK") {
			t.Errorf("sluice %v = %d %q %q; want 0 and 200 OK", args, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI(t, nil, "healthcheck", "--http-addr", "127.0.0.1:1", "--timeout", "2s"); code != 1 || !strings.Contains(errOut, "/readyz") {
		t.Errorf("sluice healthcheck with nothing listening = %d %q; want 1 naming /readyz", code, errOut)
	}
}
