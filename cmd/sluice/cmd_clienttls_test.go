package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// TestBenchGRPCOverTLS drives check-grpc at a node serving TLS on gRPC
// with client certificates and keys required: it runs with the right
// flags, and without one of them fails at once naming the flag to give.
func TestBenchGRPCOverTLS(t *testing.T) {
	t.Parallel()
	b := startTLSNode(t)
	cert := b.clientCA.Client(t, "bench", time.Now().Add(time.Hour))
	base := []string{"bench", "--server", b.node.httpURL, "--grpc-server", b.node.grpcAddr,
		"--requests", "50", "--workers", "2", "--keys", "4"}
	tlsFlags := []string{"--grpc-tls", "--grpc-ca-file", b.ca.File}
	certFlags := []string{"--grpc-cert-file", cert.CertFile, "--grpc-key-file", cert.KeyFile}
	args := func(parts ...[]string) []string {
		out := append([]string(nil), base...)
		for _, p := range parts {
			out = append(out, p...)
		}
		return append(out, "check-grpc")
	}

	code, out, errs := runCLI(t, nil, args(tlsFlags, certFlags, []string{"--api-key", b.checkKey, "--grpc-server-name", "localhost"})...)
	if code != 0 {
		t.Fatalf("sluice bench over mTLS with a key = %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 2 {
		t.Fatalf("want one row:\n%s", out)
	}
	if f := strings.Fields(rows[1]); len(f) < 5 || f[0] != "check-grpc" || f[3] != "50" || f[4] != "0" {
		t.Errorf("row %q: want check-grpc with 50 OK and 0 errors", rows[1])
	}

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no CA file", args([]string{"--grpc-tls"}, certFlags, []string{"--api-key", b.checkKey}), "--grpc-ca-file"},
		{"TLS flags without --grpc-tls", args([]string{"--grpc-ca-file", b.ca.File}, certFlags), "with --grpc-tls"},
		{"no client certificate", args(tlsFlags, []string{"--api-key", b.checkKey}), "--grpc-cert-file"},
		{"no key", args(tlsFlags, certFlags), "Unauthenticated"},
		{"a key without the scope", args(tlsFlags, certFlags, []string{"--api-key", b.otherKey}), "ratelimit:check"},
		{"another server name", args(tlsFlags, certFlags, []string{"--api-key", b.checkKey, "--grpc-server-name", "sluice.example"}), "sluice.example"},
		{"a certificate without its key", args(tlsFlags, []string{"--grpc-cert-file", cert.CertFile}), "go together"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errs := runCLI(t, nil, tt.args...)
			if code == 0 || !strings.Contains(errs, tt.want) {
				t.Errorf("sluice %v = %d\n%s\nwant a failure saying %q", tt.args, code, errs, tt.want)
			}
		})
	}
}

// TestBenchGRPCPlaintextToTLS: without a TLS flag bench dials plaintext,
// and fails at once suggesting --grpc-tls.
func TestBenchGRPCPlaintextToTLS(t *testing.T) {
	t.Parallel()
	b := startTLSNode(t)
	code, _, errs := runCLI(t, nil, "bench", "--server", b.node.httpURL, "--grpc-server", b.node.grpcAddr,
		"--requests", "10", "--api-key", b.checkKey, "check-grpc")
	if code == 0 || !strings.Contains(errs, "--grpc-tls") {
		t.Errorf("sluice bench in plaintext to a TLS gRPC port = %d\n%s\nwant a failure suggesting --grpc-tls", code, errs)
	}
}

// TestBenchCompareTLS: --compare-tls dials the compared gRPC server over
// TLS with the --grpc-* files while the in-process node stays plaintext.
func TestBenchCompareTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "compare CA")
	leaf := ca.Server(t, "compare")
	cfg := testConfig(t)
	cfg.GRPCTLSCertFile, cfg.GRPCTLSKeyFile = leaf.CertFile, leaf.KeyFile
	n := startNode(t, cfg)
	code, out, errs := runCLI(t, nil, "bench", "--requests", "20", "--workers", "2", "--keys", "4",
		"--compare", n.grpcAddr, "--compare-tls", "--grpc-ca-file", ca.File, "check-grpc")
	if code != 0 || !strings.Contains(out, "compare") {
		t.Fatalf("sluice bench --compare-tls = %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = runCLI(t, nil, "bench", "--requests", "20", "--compare", n.grpcAddr, "check-grpc")
	if code == 0 || !strings.Contains(errs, "--compare-tls") {
		t.Errorf("sluice bench --compare a TLS port in plaintext = %d\n%s\nwant a failure suggesting TLS", code, errs)
	}
}

// TestCLIOverHTTPS runs commands that take --server against a node
// serving HTTPS with a certificate of a private CA: they succeed with
// --ca-file (or --insecure-skip-verify on loopback) and fail without.
func TestCLIOverHTTPS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "private CA")
	leaf := ca.Server(t, "node")
	cfg := testConfig(t)
	cfg.TLSCertFile, cfg.TLSKeyFile = leaf.CertFile, leaf.KeyFile
	n := startNode(t, cfg)
	server := "https://" + strings.TrimPrefix(n.httpURL, "http://")

	code, out, errs := runCLI(t, nil, "shorten", "--server", server, "--ca-file", ca.File, "--slug", "tls1", "https://example.com/tls")
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "/tls1") {
		t.Fatalf("sluice shorten over HTTPS with --ca-file = %d %q\n%s", code, out, errs)
	}
	for _, args := range [][]string{
		{"links", "get", "tls1", "--server", server, "--ca-file", ca.File},
		{"links", "get", "tls1", "--server", server, "--insecure-skip-verify"},
		{"links", "get", "tls1", "--server", server, "--ca-file", ca.File, "--server-name", "localhost"},
	} {
		if code, out, errs := runCLI(t, nil, args...); code != 0 || !strings.Contains(out, "https://example.com/tls") {
			t.Errorf("sluice %v = %d %q\n%s", args, code, out, errs)
		}
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no CA file", []string{"links", "get", "tls1", "--server", server}, "certificate"},
		{"another name", []string{"links", "get", "tls1", "--server", server, "--ca-file", ca.File, "--server-name", "other.example"}, "other.example"},
		{"a CA file for http", []string{"check", "--policy", "p", "--server", n.httpURL, "--ca-file", ca.File, "k"}, "need an https:// server"},
		{"skip-verify off loopback", []string{"check", "--policy", "p", "--server", "https://sluice.example", "--insecure-skip-verify", "k"}, "not a loopback address"},
		{"a missing CA file", []string{"shorten", "--server", server, "--ca-file", ca.File + ".missing", "https://example.com/"}, "--ca-file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errs := runCLI(t, nil, tt.args...)
			if code == 0 || !strings.Contains(errs, tt.want) {
				t.Errorf("sluice %v = %d\n%s\nwant a failure saying %q", tt.args, code, errs, tt.want)
			}
		})
	}

	// bench's HTTP side too: the keyless loopback admin creates its policy.
	code, out, errs = runCLI(t, nil, "bench", "--server", server, "--ca-file", ca.File, "--requests", "20", "--workers", "2", "check-http")
	if code != 0 || !strings.Contains(out, "check-http") {
		t.Errorf("sluice bench check-http over HTTPS = %d\n%s\n%s", code, out, errs)
	}
}
