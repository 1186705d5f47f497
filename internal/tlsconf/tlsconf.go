// Package tlsconf serves TLS on Sluice's listeners from PEM files that may
// be replaced while the node runs: a certificate and its key, and, for
// mutual TLS, the certificate authorities a client's certificate must
// chain to.
//
// The files are checked (one os.Stat each) at every TLS handshake; when
// one changed (another file renamed into its place, or its modification
// time or size), all are read again and the new certificate serves every
// handshake from then on. Connections already open keep the certificate
// they started with. A replacement that cannot be
// loaded (a key that does not match, a half-written file) is logged and the
// previous certificate stays in force until the files change again, so a
// rotation written file by file (certificate first, then key) is picked up
// once both are in place. Writing a file elsewhere and renaming it over the
// old one, or a Kubernetes secret volume's symlink swap, is seen at once.
//
// The minimum version is TLS 1.2.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
)

// Log attribute keys.
const (
	logCert     = "cert_file"
	logCA       = "client_ca_file"
	logError    = "error"
	logNotAfter = "not_after"
)

// Options names the files of one listener.
type Options struct {
	// CertFile and KeyFile are the PEM certificate (chain, leaf first) and
	// its private key. Required.
	CertFile, KeyFile string
	// ClientCAFile, when set, is a PEM file of certificate authorities:
	// every client must present a certificate chaining to one of them
	// (tls.RequireAndVerifyClientCert). If empty, clients are not asked
	// for certificates.
	ClientCAFile string
	// NextProtos are the ALPN protocols offered ("h2" for gRPC; "h2" and
	// "http/1.1" for HTTP).
	NextProtos []string
	// Logger receives reloads and failed reloads. If nil, nothing is logged.
	Logger *slog.Logger
}

// Reloader hands the current certificate to every TLS handshake. It is safe
// for concurrent use; build it with New.
type Reloader struct {
	opts Options
	log  *slog.Logger

	cur atomic.Pointer[loaded]
	mu  sync.Mutex // serialises reloads
	// tried is the stamp of the files last tried, loaded or not, so a
	// broken replacement is read once, not at every handshake.
	tried stamp
}

// loaded is one generation of the files.
type loaded struct {
	stamp stamp
	cfg   *tls.Config // served to handshakes (GetConfigForClient)
	leaf  *x509.Certificate
}

// stamp identifies the files' contents without reading them: each file's
// identity (device and inode on Unix: a file renamed into place is another
// file, even with the same time and size), modification time and size.
type stamp [3]os.FileInfo

// same reports whether o names the same files, unchanged.
func (st stamp) same(o stamp) bool {
	for i := range st {
		a, b := st[i], o[i]
		if (a == nil) != (b == nil) {
			return false
		}
		if a != nil && (!os.SameFile(a, b) || !a.ModTime().Equal(b.ModTime()) || a.Size() != b.Size()) {
			return false
		}
	}
	return true
}

// New reads the files and returns a Reloader serving them, or the reason
// they cannot serve.
func New(opts Options) (*Reloader, error) {
	if opts.CertFile == "" || opts.KeyFile == "" {
		return nil, errors.New("tls: a certificate file and a key file are both required")
	}
	r := &Reloader{opts: opts, log: opts.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	st, err := r.stat()
	if err != nil {
		return nil, err
	}
	l, err := r.load(st)
	if err != nil {
		return nil, err
	}
	r.tried = st
	r.cur.Store(l)
	return r, nil
}

// Config returns the tls.Config of a listener (tls.NewListener, or gRPC's
// credentials.NewTLS): each handshake gets the current files' settings.
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: slices.Clone(r.opts.NextProtos),
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.current().cfg, nil
		},
	}
}

// Leaf returns the certificate in force.
func (r *Reloader) Leaf() *x509.Certificate { return r.current().leaf }

// current returns the files' settings, reloading them first when they
// changed.
func (r *Reloader) current() *loaded {
	l := r.cur.Load()
	st, err := r.stat()
	if err != nil || st.same(l.stamp) {
		return l // a file missing for a moment (mid-rename) keeps the old settings
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if l = r.cur.Load(); st.same(l.stamp) || st.same(r.tried) {
		return l
	}
	r.tried = st
	nl, err := r.load(st)
	if err != nil {
		r.log.Error("tls files changed but cannot be loaded; the previous certificate stays in force",
			logCert, r.opts.CertFile, logError, err)
		return l
	}
	r.cur.Store(nl)
	r.log.Info("tls certificate reloaded", logCert, r.opts.CertFile, logCA, r.opts.ClientCAFile,
		logNotAfter, nl.leaf.NotAfter)
	return nl
}

func (r *Reloader) stat() (stamp, error) {
	var st stamp
	for i, f := range []string{r.opts.CertFile, r.opts.KeyFile, r.opts.ClientCAFile} {
		if f == "" {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			return stamp{}, fmt.Errorf("tls: %w", err)
		}
		st[i] = fi
	}
	return st, nil
}

// load reads the files into a handshake configuration.
func (r *Reloader) load(st stamp) (*loaded, error) {
	cert, err := tls.LoadX509KeyPair(r.opts.CertFile, r.opts.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: %s and %s: %w", r.opts.CertFile, r.opts.KeyFile, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		NextProtos:   slices.Clone(r.opts.NextProtos),
		Certificates: []tls.Certificate{cert},
	}
	if r.opts.ClientCAFile != "" {
		pool, err := LoadPool(r.opts.ClientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return &loaded{stamp: st, cfg: cfg, leaf: cert.Leaf}, nil
}

// LoadPool reads a PEM file of certificates into a pool, or says why it
// cannot.
func LoadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: %s holds no PEM certificate", file)
	}
	return pool, nil
}
