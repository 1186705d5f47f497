package main

import (
	"cmp"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/tlsconf"
)

// clientTLS is how a command checks the certificate of the Sluice server
// it dials over TLS, and the client certificate it presents: the same
// flags, under a prefix, for `sluice healthcheck`, the commands that take
// --server and bench's gRPC dial. The zero value trusts the system's
// certificate authorities and presents no certificate.
type clientTLS struct {
	caFile, serverName string
	certFile, keyFile  string
	skipVerify         bool
	// prefix is the flags' prefix ("grpc-"), named in errors.
	prefix string
}

// register adds --<prefix>ca-file, --<prefix>server-name and
// --<prefix>insecure-skip-verify to fs, and with clientCert
// --<prefix>cert-file and --<prefix>key-file; what names the server
// ("--server").
func (c *clientTLS) register(fs *flag.FlagSet, prefix, what string, clientCert bool) {
	c.prefix = prefix
	fs.StringVar(&c.caFile, prefix+"ca-file", "", "PEM certificate authorities "+what+"'s certificate must chain to (default: the system's)")
	fs.StringVar(&c.serverName, prefix+"server-name", "", "the name "+what+"'s certificate must hold (default: the host dialed)")
	fs.BoolVar(&c.skipVerify, prefix+"insecure-skip-verify", false, "do not check "+what+"'s certificate (loopback addresses only)")
	if clientCert {
		fs.StringVar(&c.certFile, prefix+"cert-file", "", "PEM client certificate to present to "+what+" (mutual TLS; with --"+prefix+"key-file)")
		fs.StringVar(&c.keyFile, prefix+"key-file", "", "PEM key of --"+prefix+"cert-file")
	}
}

// set reports whether any of the flags was given.
func (c *clientTLS) set() bool {
	return c.caFile != "" || c.serverName != "" || c.certFile != "" || c.keyFile != "" || c.skipVerify
}

// config returns the TLS configuration to dial addr (host:port) with:
// TLS 1.2 or later, the chain checked against --ca-file (or the system's
// roots) for --server-name (or the host dialed), nothing checked with
// --insecure-skip-verify, which only a loopback addr may use.
func (c *clientTLS) config(addr string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	switch {
	case c.skipVerify:
		if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" {
			return nil, fmt.Errorf("--%sinsecure-skip-verify: %s is not a loopback address", c.prefix, addr)
		}
		cfg.InsecureSkipVerify = true
	case c.caFile != "":
		pool, err := tlsconf.LoadPool(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("--%sca-file: %w", c.prefix, err)
		}
		cfg.RootCAs = pool
	}
	// Empty, the host dialed: net/http and grpc-go fill it in.
	cfg.ServerName = c.serverName
	if (c.certFile == "") != (c.keyFile == "") {
		return nil, fmt.Errorf("--%scert-file and --%skey-file go together", c.prefix, c.prefix)
	}
	if c.certFile != "" {
		cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--%scert-file: %w", c.prefix, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// httpClient returns the HTTP client for the server at base (a URL): nil,
// the client package's default, when no flag was given; an error when one
// was but base is not https://.
func (c *clientTLS) httpClient(base string) (*http.Client, error) {
	if !c.set() {
		return nil, nil
	}
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "https" {
		return nil, fmt.Errorf("--%sca-file, --%sserver-name and --%sinsecure-skip-verify need an https:// server, not %q",
			c.prefix, c.prefix, c.prefix, base)
	}
	cfg, err := c.config(net.JoinHostPort(u.Hostname(), cmp.Or(u.Port(), "443")))
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true,
		Proxy: http.ProxyFromEnvironment}}, nil
}

// client returns a client of the server at base with key, whose first
// call fails when the TLS flags are wrong.
func (c *clientTLS) client(base, key string) *client.Client {
	cl := client.New(base, key)
	hc, err := c.httpClient(cl.BaseURL)
	if err != nil {
		hc = &http.Client{Transport: failingTransport{err}}
	}
	cl.HTTPClient = hc
	return cl
}

// failingTransport fails every request with err: how a client built where
// no error can be returned reports bad TLS flags at its first call.
type failingTransport struct{ err error }

func (t failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return nil, t.err
}
