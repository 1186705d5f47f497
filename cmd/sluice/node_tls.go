package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/edge"
	"github.com/sluicehq/sluice/internal/tlsconf"
)

// httpTLS wraps the HTTP listener ln in TLS when --tls-cert-file is set
// (after the PROXY protocol header, which comes first on the wire), with
// the files reloaded at the next handshake once they change.
func (n *node) httpTLS(ln net.Listener) (net.Listener, error) {
	cert, key := n.cfg.HTTPTLS()
	if cert == "" {
		return ln, nil
	}
	r, err := tlsconf.New(tlsconf.Options{CertFile: cert, KeyFile: key, NextProtos: []string{"h2", "http/1.1"}, Logger: n.log})
	if err != nil {
		ln.Close()
		return nil, err
	}
	n.log.Info("https on the HTTP listener", "cert_file", cert, "not_after", r.Leaf().NotAfter)
	n.exportExpiry("http", r)
	return tls.NewListener(ln, r.Config()), nil
}

// gatewayTLS is the gateway's TLS configuration when
// --gateway-tls-cert-file or --tls-cert-file is set (reloaded at the next
// handshake once the files change), or nil for plain HTTP.
func (n *node) gatewayTLS() (*tls.Config, error) {
	cert, key := n.cfg.GatewayTLS()
	if cert == "" {
		return nil, nil
	}
	r, err := tlsconf.New(tlsconf.Options{CertFile: cert, KeyFile: key, NextProtos: []string{"h2", "http/1.1"}, Logger: n.log})
	if err != nil {
		return nil, err
	}
	n.log.Info("https on the gateway listener", "cert_file", cert, "not_after", r.Leaf().NotAfter)
	n.exportExpiry("gateway", r)
	return r.Config(), nil
}

// grpcServerOptions are the gRPC server's transport credentials: TLS when
// --grpc-tls-cert-file or --tls-cert-file is set, client certificates
// required when --grpc-client-ca-file is; none (plaintext h2c) otherwise.
func (n *node) grpcServerOptions() ([]grpc.ServerOption, error) {
	cert, key := n.cfg.GRPCTLS()
	if cert == "" {
		if n.cfg.GRPCRequireKey {
			n.log.Warn("--grpc-require-key without TLS on gRPC: API keys cross the network in clear text; set --tls-cert-file or --grpc-tls-cert-file")
		}
		return nil, nil
	}
	r, err := tlsconf.New(tlsconf.Options{CertFile: cert, KeyFile: key, ClientCAFile: n.cfg.GRPCClientCAFile,
		NextProtos: []string{"h2"}, Logger: n.log})
	if err != nil {
		return nil, err
	}
	n.log.Info("tls on the gRPC listener", "cert_file", cert, "not_after", r.Leaf().NotAfter,
		"client_ca_file", n.cfg.GRPCClientCAFile, "require_key", n.cfg.GRPCRequireKey)
	n.exportExpiry("grpc", r)
	return []grpc.ServerOption{grpc.Creds(&loggedCreds{TransportCredentials: credentials.NewTLS(r.Config()), log: n.log})}, nil
}

// exportExpiry serves the listener's certificate expiry as
// sluice_tls_certificate_not_after_seconds{listener}, read at each scrape
// (so a rotation shows at once), for an alert well before it passes.
func (n *node) exportExpiry(listener string, r *tlsconf.Reloader) {
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "sluice_tls_certificate_not_after_seconds",
		Help:        "When the certificate a TLS listener serves expires, in Unix seconds.",
		ConstLabels: prometheus.Labels{"listener": listener},
	}, func() float64 { return float64(r.Leaf().NotAfter.Unix()) }))
}

// loggedCreds logs failed TLS handshakes on the gRPC listener (no client
// certificate, one from another CA, an expired one, no ALPN h2), at most
// one line a second: grpc-go reports them only in its own log, at info.
// A connection closed before its first byte (a TCP probe) is not logged.
type loggedCreds struct {
	credentials.TransportCredentials
	log      *slog.Logger
	last     atomic.Int64
	unlogged atomic.Int64
}

func (c *loggedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err == nil || errors.Is(err, io.EOF) {
		return conn, info, err
	}
	now := time.Now().UnixNano()
	last := c.last.Load()
	if now-last < int64(time.Second) || !c.last.CompareAndSwap(last, now) {
		c.unlogged.Add(1)
		return conn, info, err
	}
	c.log.Warn("grpc tls handshake failed", "peer", raw.RemoteAddr().String(), "error", err,
		"unlogged_since_last", c.unlogged.Swap(0))
	return conn, info, err
}

func (c *loggedCreds) Clone() credentials.TransportCredentials {
	return &loggedCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log}
}

// connContext is edge.ConnContext for connections that may be TLS ones:
// the TCP peer is read from the connection under TLS.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	return edge.ConnContext(ctx, c)
}
