package gateway_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/sluicehq/sluice/internal/edge"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/gateway"
	"github.com/sluicehq/sluice/internal/tlsconf"
	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// TestServeTLSBehindProxyProtocol: Serve with Options.TLS serves HTTPS to
// a real client whose connection starts with a PROXY v2 header (then the
// TLS handshake), forwards to the upstream naming the client of the
// header, and a certificate renamed over the served one is what the next
// new connection gets.
func TestServeTLSBehindProxyProtocol(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "gateway CA")
	first := ca.Server(t, "gateway")
	r, err := tlsconf.New(tlsconf.Options{CertFile: first.CertFile, KeyFile: first.KeyFile,
		NextProtos: []string{"h2", "http/1.1"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var g *gateway.Gateway
	_, up, _ := setupOpts(t, gateway.Config{}, map[string]int64{"free": 1000}, func(o *gateway.Options) {
		o.TLS = r.Config()
		var err error
		if g, err = gateway.New(*o); err != nil {
			t.Fatal(err)
		}
	})
	addr := listenGateway(t, g, func(ln net.Listener) net.Listener { return edge.Listen(ln, nil) })

	// get sends GET / over a new connection: PROXY header naming
	// 203.0.113.7, then TLS trusting only ca; it returns the served
	// certificate and the negotiated protocol.
	get := func() (*x509.Certificate, string, error) {
		var served *x509.Certificate
		tr := &http.Transport{
			ForceAttemptHTTP2: true,
			DisableKeepAlives: true,
			DialTLSContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 40000}, c.RemoteAddr())
				if _, err := h.WriteTo(c); err != nil {
					c.Close()
					return nil, err
				}
				tc := tls.Client(c, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS12,
					NextProtos: []string{"h2", "http/1.1"}})
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, err
				}
				served = tc.ConnectionState().PeerCertificates[0]
				return tc, nil
			},
		}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		resp, err := c.Get("https://localhost/hello")
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "hello" {
			t.Fatalf("GET through the gateway = %d %q, want 200 from the upstream", resp.StatusCode, b)
		}
		return served, resp.Proto, nil
	}

	cert, proto, err := get()
	if err != nil {
		t.Fatal(err)
	}
	if !cert.Equal(first.Cert) {
		t.Fatalf("served %v, want the first certificate", cert.SerialNumber)
	}
	if proto != "HTTP/2.0" {
		t.Errorf("protocol = %s, want HTTP/2.0 (ALPN h2)", proto)
	}
	if _, xff := up.last(); xff != "203.0.113.7" {
		t.Errorf("upstream saw X-Forwarded-For %q, want the PROXY header's client 203.0.113.7", xff)
	}

	// Plain HTTP on the TLS listener gets no answer from the upstream.
	if resp, err := http.Get("http://" + addr + "/hello"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) == "hello" {
			t.Error("plain HTTP reached the upstream through the TLS listener")
		}
	}

	// Rotation: the new key, then the new certificate, renamed into place.
	second := ca.Server(t, "gateway")
	for _, f := range [][2]string{{second.KeyFile, first.KeyFile}, {second.CertFile, first.CertFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1]+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f[1]+".new", f[1]); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.EventuallyNil(t, 10*time.Second, "a new connection gets the new certificate after the files were replaced", func() error {
		cert, _, err := get()
		return enginetest.State(err == nil && cert.Equal(second.Cert), "still the old certificate (err %v)", err)
	})
}

// TestServeTLSRefusesOldVersions: the gateway's TLS floor is 1.2.
func TestServeTLSRefusesOldVersions(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "gateway CA")
	leaf := ca.Server(t, "gateway")
	r, err := tlsconf.New(tlsconf.Options{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile})
	if err != nil {
		t.Fatal(err)
	}
	var g *gateway.Gateway
	setupOpts(t, gateway.Config{}, map[string]int64{"free": 1000}, func(o *gateway.Options) {
		o.TLS = r.Config()
		var err error
		if g, err = gateway.New(*o); err != nil {
			t.Fatal(err)
		}
	})
	addr := listenGateway(t, g, nil)
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	if err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}
