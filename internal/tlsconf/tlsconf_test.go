package tlsconf_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// serve accepts TLS connections with cfg and writes "ok" on each once its
// handshake succeeded.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tl := tls.NewListener(ln, cfg)
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Write([]byte("ok"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects with cfg and returns the server's leaf, or the error the
// handshake (or the server's refusal after it, in TLS 1.3) gave.
func dial(addr string, cfg *tls.Config) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, err
	}
	if string(b) != "ok" {
		return nil, errors.New("server closed without ok")
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func TestServesAndRotates(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	first, second := ca.Server(t, "first"), ca.Server(t, "second")
	r, err := tlsconf.New(tlsconf.Options{CertFile: first.CertFile, KeyFile: first.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.Config())
	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
	leaf, err := dial(addr, client)
	if err != nil || leaf.Subject.CommonName != "first" {
		t.Fatalf("dial = %v, %v; want the first certificate", leaf, err)
	}

	// A broken replacement (the second certificate with the first's key)
	// keeps the first in force.
	bad := &tlstest.Leaf{CertFile: second.CertFile, KeyFile: first.KeyFile}
	bad.Install(t, first.CertFile, first.KeyFile)
	if leaf, err := dial(addr, client); err != nil || leaf.Subject.CommonName != "first" {
		t.Fatalf("after a mismatched key pair: dial = %v, %v; want the first certificate still", leaf, err)
	}

	second.Install(t, first.CertFile, first.KeyFile)
	enginetest.Eventually(t, 10*time.Second, "the second certificate", func() bool {
		leaf, err := dial(addr, client)
		return err == nil && leaf.Subject.CommonName == "second"
	})
	if got := r.Leaf().Subject.CommonName; got != "second" {
		t.Errorf("Leaf() = %q, want second", got)
	}
}

func TestMinimumVersion(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	srv := ca.Server(t, "srv")
	r, err := tlsconf.New(tlsconf.Options{CertFile: srv.CertFile, KeyFile: srv.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.Config())
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		if _, err := dial(addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: v, MaxVersion: v}); err != nil {
			t.Errorf("TLS %x refused: %v", v, err)
		}
	}
	if _, err := dial(addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS11, MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("TLS 1.1 accepted, want refused")
	}
}

func TestClientCertificates(t *testing.T) {
	t.Parallel()
	ca, other := tlstest.NewCA(t, "clients CA"), tlstest.NewCA(t, "other CA")
	srv := ca.Server(t, "srv")
	caFile := ca.File
	r, err := tlsconf.New(tlsconf.Options{CertFile: srv.CertFile, KeyFile: srv.KeyFile, ClientCAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.Config())
	day := time.Now().Add(24 * time.Hour)
	for _, tt := range []struct {
		name string
		cert *tlstest.Leaf
		ok   bool
	}{
		{"signed by the CA", ca.Client(t, "good", day), true},
		{"no certificate", nil, false},
		{"another CA", other.Client(t, "stranger", day), false},
		{"expired", ca.Client(t, "old", time.Now().Add(-time.Hour)), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
			if tt.cert != nil {
				cfg.Certificates = []tls.Certificate{tt.cert.TLS}
			}
			if _, err := dial(addr, cfg); (err == nil) != tt.ok {
				t.Errorf("dial = %v, want accepted %v", err, tt.ok)
			}
		})
	}

	// Replacing the CA file trusts the new CA's clients on new connections.
	b, err := os.ReadFile(other.File)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile+".new", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(caFile+".new", caFile); err != nil {
		t.Fatal(err)
	}
	stranger := other.Client(t, "stranger", day)
	enginetest.Eventually(t, 10*time.Second, "the new CA's client accepted", func() bool {
		_, err := dial(addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", Certificates: []tls.Certificate{stranger.TLS}})
		return err == nil
	})
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	a, b := ca.Server(t, "a"), ca.Server(t, "b")
	for _, tt := range []struct {
		name string
		opts tlsconf.Options
		want string
	}{
		{"no key", tlsconf.Options{CertFile: a.CertFile}, "both required"},
		{"missing file", tlsconf.Options{CertFile: a.CertFile + ".none", KeyFile: a.KeyFile}, "no such file"},
		{"key of another certificate", tlsconf.Options{CertFile: a.CertFile, KeyFile: b.KeyFile}, "private key does not match"},
		{"CA file without PEM", tlsconf.Options{CertFile: a.CertFile, KeyFile: a.KeyFile, ClientCAFile: a.KeyFile}, "holds no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tlsconf.New(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestRenamedIntoPlace: a file renamed over the certificate is another
// file, reloaded even when it keeps the old one's time and size (a copy
// that preserves times, as rsync -t or cp -p do).
func TestRenamedIntoPlace(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	srv := ca.Server(t, "srv")
	var logs strings.Builder
	var mu sync.Mutex
	r, err := tlsconf.New(tlsconf.Options{CertFile: srv.CertFile, KeyFile: srv.KeyFile,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(srv.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(srv.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	tmp := srv.CertFile + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, srv.CertFile); err != nil {
		t.Fatal(err)
	}
	_ = r.Leaf() // a handshake's check
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "tls certificate reloaded") {
		t.Errorf("a file renamed into place with the same time and size was not reloaded; log:\n%s", logs.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestSeveralCertificatesBySNI: lists of files serve each certificate to
// the names it holds, the first to a client naming none that matches,
// and a replaced file of the list is picked up like a single one.
func TestSeveralCertificatesBySNI(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "test CA")
	base, short := ca.Server(t, "base"), ca.ServerFor(t, "short", "go.example.com")
	r, err := tlsconf.New(tlsconf.Options{CertFile: base.CertFile + "," + short.CertFile, KeyFile: base.KeyFile + ", " + short.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.Config())
	for _, c := range []struct{ sni, want string }{{"go.example.com", "short"}, {"localhost", "base"}, {"other.example.com", "base"}} {
		leaf, err := dial(addr, &tls.Config{RootCAs: ca.Pool(), ServerName: c.sni, InsecureSkipVerify: c.sni == "other.example.com"})
		if err != nil || leaf.Subject.CommonName != c.want {
			t.Errorf("dial naming %s = %v, %v; want the %s certificate", c.sni, leaf, err, c.want)
		}
	}
	renewed := ca.ServerFor(t, "short renewed", "go.example.com")
	renewed.Install(t, short.CertFile, short.KeyFile)
	enginetest.Eventually(t, 10*time.Second, "the renewed certificate", func() bool {
		leaf, err := dial(addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "go.example.com"})
		return err == nil && leaf.Subject.CommonName == "short renewed"
	})
	for _, bad := range [][2]string{{base.CertFile + "," + short.CertFile, base.KeyFile}, {base.CertFile + ",", base.KeyFile + ","}} {
		if _, err := tlsconf.New(tlsconf.Options{CertFile: bad[0], KeyFile: bad[1]}); err == nil {
			t.Errorf("New(%q, %q) accepted, want refused", bad[0], bad[1])
		}
	}
}
