package enginetest

import (
	"bufio"
	"context"
	"crypto/tls"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// TLSRedis is a redis-server that speaks only TLS, with a certificate
// authority made for it.
type TLSRedis struct {
	*Process
	// CAFile is the PEM file of the authority that signed the server's
	// certificate, which names 127.0.0.1 and localhost.
	CAFile string
}

// StartRedisTLS runs redis-server for the calling test with TLS only
// (--port 0 --tls-port PORT) on a spare loopback port, its certificate
// signed by a CA made in t.TempDir(); clients need no certificate of their
// own (tlstest makes them). URL returns rediss://127.0.0.1:PORT. It returns once the server
// answers INFO over TLS, and stops it when the test ends. It skips the test
// (fails it when CI=true) if redis-server is not installed; it fails it if
// that redis-server was built without TLS.
func StartRedisTLS(t testing.TB) *TLSRedis {
	t.Helper()
	dir := t.TempDir()
	authority := tlstest.NewCA(t, "sluice test CA")
	srv := authority.Server(t, "127.0.0.1")
	ca, cert, key, pool := authority.File, srv.CertFile, srv.KeyFile, authority.Pool()
	p := startProcess(t, spec{
		name: "redis-server (tls)",
		path: "redis-server",
		url:  func(addr string) string { return "rediss://" + addr },
		args: func(port int, dir, _ string) []string {
			return []string{
				"--bind", "127.0.0.1", "--port", "0", "--tls-port", strconv.Itoa(port),
				"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca,
				"--tls-auth-clients", "no",
				"--save", "", "--appendonly", "no", "--dir", dir,
				"--daemonize", "no", "--logfile", "",
			}
		},
		ready: func(ctx context.Context, addr, _ string, pid int) error {
			conn, _, err := dial(ctx, addr)
			if err != nil {
				return err
			}
			tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
			defer tc.Close()
			if err := tc.HandshakeContext(ctx); err != nil {
				return err
			}
			return redisIsPid(tc, bufio.NewReader(tc), pid)
		},
	}, dir)
	return &TLSRedis{Process: p, CAFile: ca}
}
