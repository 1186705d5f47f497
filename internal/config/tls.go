package config

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/sluicehq/sluice/internal/tlsconf"
)

// HTTPTLS returns the certificate and key files of the HTTP listener; both
// are empty when it serves plain HTTP.
func (c Config) HTTPTLS() (certFile, keyFile string) { return c.TLSCertFile, c.TLSKeyFile }

// GRPCTLS returns the certificate and key files of the gRPC listener:
// --grpc-tls-cert-file's when set, else --tls-cert-file's; both are empty
// when it serves plaintext gRPC (h2c).
func (c Config) GRPCTLS() (certFile, keyFile string) {
	if c.GRPCTLSCertFile != "" || c.GRPCTLSKeyFile != "" {
		return c.GRPCTLSCertFile, c.GRPCTLSKeyFile
	}
	return c.TLSCertFile, c.TLSKeyFile
}

// GatewayTLS returns the certificate and key files of the gateway's
// listener: --gateway-tls-cert-file's when set, else --tls-cert-file's;
// both are empty when it serves plain HTTP.
func (c Config) GatewayTLS() (certFile, keyFile string) {
	if c.Gateway.TLSCertFile != "" || c.Gateway.TLSKeyFile != "" {
		return c.Gateway.TLSCertFile, c.Gateway.TLSKeyFile
	}
	return c.TLSCertFile, c.TLSKeyFile
}

// validateTLS refuses a certificate without its key (or the reverse), a
// pair that cannot be loaded, and client CAs without TLS on gRPC.
func (c Config) validateTLS(bad func(flag, format string, args ...any)) {
	pair := func(certFlag, keyFlag, cert, key string) {
		switch {
		case cert == "" && key == "":
		case cert == "":
			bad(certFlag, "must be set with --%s", keyFlag)
		case key == "":
			bad(keyFlag, "must be set with --%s", certFlag)
		default:
			certs, keys, err := tlsconf.SplitPairs(cert, key)
			if err != nil {
				bad(certFlag, "%v", err)
				return
			}
			for i := range certs {
				if _, err := tls.LoadX509KeyPair(certs[i], keys[i]); err != nil {
					bad(certFlag, "%v", err)
				}
			}
		}
	}
	pair("tls-cert-file", "tls-key-file", c.TLSCertFile, c.TLSKeyFile)
	pair("grpc-tls-cert-file", "grpc-tls-key-file", c.GRPCTLSCertFile, c.GRPCTLSKeyFile)
	pair("gateway-tls-cert-file", "gateway-tls-key-file", c.Gateway.TLSCertFile, c.Gateway.TLSKeyFile)
	if c.GRPCClientCAFile == "" {
		return
	}
	if cert, _ := c.GRPCTLS(); cert == "" {
		bad("grpc-client-ca-file", "needs TLS on gRPC (--tls-cert-file or --grpc-tls-cert-file)")
	}
	pem, err := os.ReadFile(c.GRPCClientCAFile)
	if err != nil {
		bad("grpc-client-ca-file", "%v", err)
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		bad("grpc-client-ca-file", "%s holds no PEM certificate", c.GRPCClientCAFile)
	}
}
