package enginetest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// HAProxy configures StartHAProxy: an HTTP load balancer, round robin over
// its backends.
type HAProxy struct {
	// Backends are the servers' "host:port" addresses.
	Backends []string
	// SendProxyV2 opens every backend connection with a PROXY protocol
	// v2 header naming the client (server ... send-proxy-v2).
	SendProxyV2 bool
	// ForwardFor appends the client's address to X-Forwarded-For
	// (option forwardfor).
	ForwardFor bool
	// HealthCheck, if set, is the path HAProxy polls on every backend
	// (option httpchk GET HealthCheck, every 500 ms; two failures take a
	// server out, two successes bring it back), and a request whose
	// connection to a server fails, or a GET or HEAD answered 503, is
	// retried on another (option redispatch, retries 2, retry-on; never
	// a POST); the frontend then also serves HAProxy's
	// statistics at /haproxy-stats (";csv" for CSV), where a test can
	// wait for every server to be UP. Every server is listed again as an
	// unchecked backup, used (all of them) only while no checked server
	// is up. Empty: no health checks.
	HealthCheck string
	// GRPCAddr and GRPCBackends, if set, add a second frontend for gRPC:
	// HTTP/2 without TLS (h2c) on GRPCAddr ("127.0.0.1:port", see
	// [SpareAddr]), balancing each request round robin over GRPCBackends.
	// With HealthCheck, GRPCBackends[i] is checked through the HTTP
	// port of Backends[i] (the same server's HTTP listener), so the two
	// lists must be the same length.
	GRPCAddr     string
	GRPCBackends []string
}

// StartHAProxy runs Debian's haproxy for the calling test on a spare
// loopback port, in HTTP mode with a configuration generated from cfg in
// t.TempDir(), and returns once it answers. [Process.URL] is
// "http://127.0.0.1:port". It is stopped when the test ends. It skips the
// test (fails it when CI=true) if haproxy is not installed.
func StartHAProxy(t testing.TB, cfg HAProxy) *Process {
	t.Helper()
	return startProcess(t, spec{
		name: "haproxy",
		path: "haproxy",
		url:  func(addr string) string { return "http://" + addr },
		args: func(port int, dir, tag string) []string {
			// The configuration names the port, so it is written for each
			// start; a failed write shows as haproxy's own complaint.
			path := filepath.Join(dir, "haproxy.cfg")
			_ = os.WriteFile(path, []byte(haproxyConfig(cfg, port, tag)), 0o600)
			return []string{"-f", path, "-db"}
		},
		ready: haproxyReady,
	}, t.TempDir())
}

// haproxyConfig is the configuration of one StartHAProxy process; its
// monitor URI, /tag, tells it from another process on the port.
func haproxyConfig(cfg HAProxy, port int, tag string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
  maxconn 512
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend fe
  bind 127.0.0.1:%d
  monitor-uri /%s
  default_backend be
`, port, tag)
	if cfg.HealthCheck != "" {
		b.WriteString("  stats enable\n  stats uri /haproxy-stats\n")
	}
	b.WriteString("backend be\n  balance roundrobin\n")
	if cfg.ForwardFor {
		b.WriteString("  option forwardfor\n")
	}
	healthChecks(&b, cfg)
	for i, addr := range cfg.Backends {
		fmt.Fprintf(&b, "  server s%d %s", i, addr)
		if cfg.SendProxyV2 {
			b.WriteString(" send-proxy-v2")
		}
		if cfg.HealthCheck != "" {
			b.WriteString(" check")
		}
		b.WriteString("\n")
	}
	backups(&b, cfg, cfg.Backends, "s", func(string) string {
		if cfg.SendProxyV2 {
			return " send-proxy-v2"
		}
		return ""
	})
	if cfg.GRPCAddr != "" {
		fmt.Fprintf(&b, `frontend fe_grpc
  bind %s proto h2
  default_backend be_grpc
backend be_grpc
  balance roundrobin
`, cfg.GRPCAddr)
		healthChecks(&b, cfg)
		for i, addr := range cfg.GRPCBackends {
			fmt.Fprintf(&b, "  server g%d %s proto h2", i, addr)
			if cfg.HealthCheck != "" && i < len(cfg.Backends) {
				_, hport, _ := strings.Cut(cfg.Backends[i], ":")
				// The check is HTTP/1 on the HTTP port, not h2 as the
				// server line's proto would make it.
				fmt.Fprintf(&b, " check port %s check-proto h1", hport)
			}
			b.WriteString("\n")
		}
		backups(&b, cfg, cfg.GRPCBackends, "g", func(string) string { return " proto h2" })
	}
	return b.String()
}

// backups lists addrs again as unchecked backup servers when cfg health
// checks: a shared engine's outage (PostgreSQL restarting) fails every
// node's /readyz at once, and with no server up HAProxy would answer 503
// itself; "option allbackups" sends to every node then, which still
// serves what does not need that engine (docs/operations.md).
func backups(b *strings.Builder, cfg HAProxy, addrs []string, prefix string, opts func(addr string) string) {
	if cfg.HealthCheck == "" || len(addrs) == 0 {
		return
	}
	b.WriteString("  option allbackups\n")
	for i, addr := range addrs {
		fmt.Fprintf(b, "  server %s%db %s%s backup\n", prefix, i, addr, opts(addr))
	}
}

// healthChecks writes a backend's health check and retry settings, if cfg
// asks for them.
func healthChecks(b *strings.Builder, cfg HAProxy) {
	if cfg.HealthCheck == "" {
		return
	}
	fmt.Fprintf(b, `  option httpchk GET %s
  http-check expect status 200
  default-server inter 500ms fastinter 250ms downinter 500ms fall 2 rise 2
  timeout check 1s
  option redispatch
  retries 2
  retry-on conn-failure empty-response 503
  http-request disable-l7-retry unless METH_GET || METH_HEAD
`, cfg.HealthCheck)
}

// haproxyReady asks for the monitor URI, which only our process answers
// with 200.
func haproxyReady(ctx context.Context, addr, tag string, _ int) error {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/"+tag, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("haproxy: %s answers %s", addr, resp.Status)
	}
	return nil
}
