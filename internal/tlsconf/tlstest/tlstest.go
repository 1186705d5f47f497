// Package tlstest makes certificate authorities and certificates for
// tests, with crypto/x509, so no key material is committed: a CA, server
// certificates for loopback and client certificates it signs, as PEM
// files in a test's temporary directory.
package tlstest

import (
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
	"testing"
	"time"
)

// CA is a certificate authority. Its zero value is not useful: use NewCA.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate as a PEM file.
	File string
}

// NewCA makes a CA named name, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, key: key, File: filepath.Join(t.TempDir(), "ca.pem")}
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Pool returns a pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is a certificate the CA signed, with its key.
type Leaf struct {
	Cert *x509.Certificate
	TLS  tls.Certificate
	// CertFile and KeyFile are the certificate and key as PEM files.
	CertFile, KeyFile string
}

// Server issues a server certificate for localhost, 127.0.0.1 and ::1,
// valid for a day.
func (ca *CA) Server(t testing.TB, name string) *Leaf {
	t.Helper()
	return ca.issue(t, name, x509.ExtKeyUsageServerAuth, time.Now().Add(24*time.Hour))
}

// Client issues a client certificate valid until notAfter (in the past
// makes an expired one).
func (ca *CA) Client(t testing.TB, name string, notAfter time.Time) *Leaf {
	t.Helper()
	return ca.issue(t, name, x509.ExtKeyUsageClientAuth, notAfter)
}

// ServerFor issues a server certificate for hosts (DNS names) only, valid
// for a day, for serving several names by SNI.
func (ca *CA) ServerFor(t testing.TB, name string, hosts ...string) *Leaf {
	t.Helper()
	return ca.issueFor(t, name, x509.ExtKeyUsageServerAuth, time.Now().Add(24*time.Hour), hosts)
}

func (ca *CA) issue(t testing.TB, name string, usage x509.ExtKeyUsage, notAfter time.Time) *Leaf {
	return ca.issueFor(t, name, usage, notAfter, nil)
}

func (ca *CA) issueFor(t testing.TB, name string, usage x509.ExtKeyUsage, notAfter time.Time, hosts []string) *Leaf {
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-2 * time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if hosts != nil {
		tmpl.DNSNames = hosts
	} else if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l := &Leaf{Cert: cert, CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"),
		TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}
	writePEM(t, l.CertFile, "CERTIFICATE", der)
	writePEM(t, l.KeyFile, "PRIVATE KEY", keyDER)
	return l
}

// Install copies l's certificate and key over certFile and keyFile, each
// written aside and renamed into place, as a rotation does.
func (l *Leaf) Install(t testing.TB, certFile, keyFile string) {
	t.Helper()
	for _, f := range []struct{ from, to string }{{l.CertFile, certFile}, {l.KeyFile, keyFile}} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		tmp := f.to + ".new"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f.to); err != nil {
			t.Fatal(err)
		}
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, file, typ string, der []byte) {
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
