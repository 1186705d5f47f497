package config

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

func TestTLSSettings(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	a, b := ca.Server(t, "a"), ca.Server(t, "b")
	for _, tt := range []struct {
		name     string
		args     []string
		want     string // "" when valid
		grpcCert string
	}{
		{name: "none"},
		{name: "shared", args: []string{"--tls-cert-file", a.CertFile, "--tls-key-file", a.KeyFile}, grpcCert: a.CertFile},
		{name: "gRPC its own", args: []string{"--tls-cert-file", a.CertFile, "--tls-key-file", a.KeyFile,
			"--grpc-tls-cert-file", b.CertFile, "--grpc-tls-key-file", b.KeyFile, "--grpc-client-ca-file", ca.File}, grpcCert: b.CertFile},
		{name: "gRPC only", args: []string{"--grpc-tls-cert-file", b.CertFile, "--grpc-tls-key-file", b.KeyFile}, grpcCert: b.CertFile},
		{name: "certificate without key", args: []string{"--tls-cert-file", a.CertFile}, want: "--tls-key-file: must be set with --tls-cert-file"},
		{name: "key without certificate", args: []string{"--grpc-tls-key-file", a.KeyFile}, want: "--grpc-tls-cert-file: must be set"},
		{name: "several by SNI", args: []string{"--tls-cert-file", a.CertFile + "," + b.CertFile, "--tls-key-file", a.KeyFile + "," + b.KeyFile}, grpcCert: a.CertFile + "," + b.CertFile},
		{name: "lists that do not pair", args: []string{"--tls-cert-file", a.CertFile + "," + b.CertFile, "--tls-key-file", a.KeyFile}, want: "--tls-cert-file: tls: 2 certificate files but 1 key files"},
		{name: "a mismatched pair in a list", args: []string{"--tls-cert-file", a.CertFile + "," + b.CertFile, "--tls-key-file", a.KeyFile + "," + a.KeyFile}, want: "--tls-cert-file: tls: private key does not match"},
		{name: "mismatched pair", args: []string{"--tls-cert-file", a.CertFile, "--tls-key-file", b.KeyFile}, want: "--tls-cert-file: tls: private key does not match"},
		{name: "client CA without TLS", args: []string{"--grpc-client-ca-file", ca.File}, want: "--grpc-client-ca-file: needs TLS on gRPC"},
		{name: "client CA not PEM", args: []string{"--tls-cert-file", a.CertFile, "--tls-key-file", a.KeyFile, "--grpc-client-ca-file", a.KeyFile},
			want: "holds no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := load(t, tt.args, nil)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Load(%q) = %v", tt.args, err)
				}
				if got, _ := cfg.GRPCTLS(); got != tt.grpcCert {
					t.Errorf("GRPCTLS() = %q, want %q", got, tt.grpcCert)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}
