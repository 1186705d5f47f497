package enginetest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
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
// own. URL returns rediss://127.0.0.1:PORT. It returns once the server
// answers INFO over TLS, and stops it when the test ends. It skips the test
// (fails it when CI=true) if redis-server is not installed; it fails it if
// that redis-server was built without TLS.
func StartRedisTLS(t testing.TB) *TLSRedis {
	t.Helper()
	dir := t.TempDir()
	ca, cert, key := WriteTestCerts(t, dir)
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(ca)
	pool.AppendCertsFromPEM(b)
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

// WriteTestCerts writes a CA and a server certificate it signed for
// 127.0.0.1 and localhost into dir, valid for a day, and returns the CA's
// file, the server's certificate and its key.
func WriteTestCerts(t testing.TB, dir string) (ca, cert, key string) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey := newKey()
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER),
		write("server.key", "EC PRIVATE KEY", keyDER)
}
