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
// A listener may serve several certificates (custom short domains): its
// certificate and key files are then comma-separated lists, paired in
// order, and each handshake gets the certificate whose names match the
// client's SNI, the first one when none does or the client names no host.
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
	"strings"
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
	// its private key, or comma-separated lists of them, paired in order,
	// for several certificates picked by SNI. Required.
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
	opts        Options
	log         *slog.Logger
	certs, keys []string // CertFile and KeyFile split

	cur atomic.Pointer[loaded]
	mu  sync.Mutex // serialises reloads
	// tried is the stamp of the files last tried, loaded or not, so a
	// broken replacement is read once, not at every handshake.
	tried stamp
}

// loaded is one generation of the files.
type loaded struct {
	stamp stamp
	cfg   *tls.Config       // served to handshakes (GetConfigForClient)
	leaf  *x509.Certificate // of several, the one that expires first
}

// stamp identifies the files' contents without reading them: each file's
// identity (device and inode on Unix: a file renamed into place is another
// file, even with the same time and size), modification time and size.
// The client CA file's comes first (nil when there is none), then each
// certificate's and key's.
type stamp []os.FileInfo

// same reports whether o names the same files, unchanged.
func (st stamp) same(o stamp) bool {
	if len(st) != len(o) {
		return false
	}
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
	certs, keys, err := SplitPairs(opts.CertFile, opts.KeyFile)
	if err != nil {
		return nil, err
	}
	r := &Reloader{opts: opts, log: opts.Logger, certs: certs, keys: keys}
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

// Leaf returns the certificate in force; of several, the one that expires
// first.
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
	st := make(stamp, 1, 1+2*len(r.certs))
	files := []string{r.opts.ClientCAFile}
	for i := range r.certs {
		files = append(files, r.certs[i], r.keys[i])
	}
	for i, f := range files {
		if f == "" {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		if i == 0 {
			st[0] = fi
		} else {
			st = append(st, fi)
		}
	}
	return st, nil
}

// SplitPairs splits comma-separated certificate and key file lists into
// pairs, or says why they do not pair up.
func SplitPairs(certFiles, keyFiles string) (certs, keys []string, err error) {
	certs, keys = strings.Split(certFiles, ","), strings.Split(keyFiles, ",")
	if len(certs) != len(keys) {
		return nil, nil, fmt.Errorf("tls: %d certificate files but %d key files: they pair up in order", len(certs), len(keys))
	}
	for i := range certs {
		certs[i], keys[i] = strings.TrimSpace(certs[i]), strings.TrimSpace(keys[i])
		if certs[i] == "" || keys[i] == "" {
			return nil, nil, errors.New("tls: an empty name in the certificate or key file list")
		}
	}
	return certs, keys, nil
}

// load reads the files into a handshake configuration.
func (r *Reloader) load(st stamp) (*loaded, error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: slices.Clone(r.opts.NextProtos),
	}
	var leaf *x509.Certificate
	for i := range r.certs {
		cert, err := tls.LoadX509KeyPair(r.certs[i], r.keys[i])
		if err != nil {
			return nil, fmt.Errorf("tls: %s and %s: %w", r.certs[i], r.keys[i], err)
		}
		cfg.Certificates = append(cfg.Certificates, cert)
		if leaf == nil || cert.Leaf.NotAfter.Before(leaf.NotAfter) {
			leaf = cert.Leaf
		}
	}
	if r.opts.ClientCAFile != "" {
		pool, err := LoadPool(r.opts.ClientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return &loaded{stamp: st, cfg: cfg, leaf: leaf}, nil
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
