package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// tlsBundle is a node serving TLS on both listeners, gRPC clients needing
// a certificate of clientCA and an API key.
type tlsBundle struct {
	node               *testNode
	ca, clientCA       *tlstest.CA
	server             *tlstest.Leaf // the node's files (CertFile, KeyFile)
	httpsAddr          string
	checkKey, otherKey string // ratelimit:check, notify:send
	logs               *enginetest.LogBuffer
}

func startTLSNode(t *testing.T) *tlsBundle {
	t.Helper()
	b := &tlsBundle{ca: tlstest.NewCA(t, "server CA"), clientCA: tlstest.NewCA(t, "client CA")}
	b.server = b.ca.Server(t, "first")
	cfg := testConfig(t)
	cfg.TLSCertFile, cfg.TLSKeyFile = b.server.CertFile, b.server.KeyFile
	cfg.GRPCClientCAFile, cfg.GRPCRequireKey = b.clientCA.File, true
	b.logs = &enginetest.LogBuffer{}
	b.node = startNodeLogging(t, cfg, slog.New(slog.NewTextHandler(b.logs, nil)))
	b.httpsAddr = strings.TrimPrefix(b.node.httpURL, "http://")
	b.node.httpURL = "https://" + b.httpsAddr
	admin := b.createKey(t, "admin", "")
	b.checkKey = b.createKey(t, "ratelimit:check", admin)
	b.otherKey = b.createKey(t, "notify:send", admin)
	return b
}

// https returns a client trusting the test CA, one connection per request.
func (b *tlsBundle) https() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: b.ca.Pool()}}}
}

// createKey creates an API key over HTTPS, as admin (the keyless loopback
// admin when empty).
func (b *tlsBundle) createKey(t *testing.T, scope, admin string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"name": scope, "scopes": []string{scope}})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, b.node.httpURL+"/v1/keys", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if admin != "" {
		req.Header.Set("Authorization", "Bearer "+admin)
	}
	resp, err := b.https().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var k struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&k); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/keys = %d, %v", resp.StatusCode, err)
	}
	return k.Key
}

// dialGRPC connects to the node's gRPC port over TLS trusting the test CA,
// presenting cert when not nil.
func (b *tlsBundle) dialGRPC(t *testing.T, cert *tlstest.Leaf) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: b.ca.Pool(), ServerName: "localhost"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLS}
	}
	conn, err := grpc.NewClient(b.node.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// shouldRateLimit calls the service with key (none when empty).
func shouldRateLimit(t *testing.T, conn *grpc.ClientConn, key string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	}
	_, err := rlspb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "edge",
		Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "203.0.113.9"}}}}})
	return err
}

// grpcLeaf returns the certificate a new gRPC connection is served.
func (b *tlsBundle) grpcLeaf(t *testing.T, cert *tlstest.Leaf) (*x509.Certificate, error) {
	t.Helper()
	conn := b.dialGRPC(t, cert)
	defer conn.Close()
	var p peer.Peer
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		return nil, err
	}
	return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0], nil
}

// TestTLSListeners runs a node with TLS on HTTP and gRPC, client
// certificates and keys required on gRPC, through real clients.
func TestTLSListeners(t *testing.T) {
	t.Parallel()
	b := startTLSNode(t)
	day := time.Now().Add(24 * time.Hour)
	good := b.clientCA.Client(t, "envoy", day)

	t.Run("https", func(t *testing.T) {
		resp, err := b.https().Get(b.node.httpURL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.ProtoMajor != 2 {
			t.Errorf("GET /healthz over TLS = %d %s, TLS %v; want 200 over HTTP/2", resp.StatusCode, resp.Proto, resp.TLS != nil)
		}
		resp, err = apiClient.Get("http://" + b.httpsAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Error("plain HTTP on the TLS listener answered 200")
			}
		}
		old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: b.ca.Pool(), MaxVersion: tls.VersionTLS11}}, Timeout: 10 * time.Second}
		if resp, err := old.Get(b.node.httpURL + "/healthz"); err == nil {
			resp.Body.Close()
			t.Error("TLS 1.1 accepted, want refused")
		}
	})

	t.Run("client certificates", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			cert *tlstest.Leaf
			ok   bool
		}{
			{"signed by the client CA", good, true},
			{"none", nil, false},
			{"expired", b.clientCA.Client(t, "old", time.Now().Add(-time.Hour)), false},
			{"signed by another CA", b.ca.Client(t, "stranger", day), false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				err := shouldRateLimit(t, b.dialGRPC(t, tt.cert), b.checkKey)
				if tt.ok && err != nil {
					t.Errorf("ShouldRateLimit = %v, want OK", err)
				}
				if !tt.ok && grpcstatus.Code(err) != codes.Unavailable {
					t.Errorf("ShouldRateLimit = %v, want the connection refused (UNAVAILABLE)", err)
				}
				if !tt.ok { // logged once the server's handshake returned, maybe after the client saw the alert
					enginetest.EventuallyNil(t, 10*time.Second, "the failed handshake logged", func() error {
						return enginetest.State(strings.Contains(b.logs.String(), "grpc tls handshake failed"), "%s", b.logs.String())
					})
				}
			})
		}
	})

	// Envoy must offer ALPN h2 (docs/envoy.md): a client that does not is
	// cut off after the handshake, one that does gets the server's
	// HTTP/2 SETTINGS.
	t.Run("alpn", func(t *testing.T) {
		for _, protos := range [][]string{nil, {"h2"}} {
			c, err := tls.Dial("tcp", b.node.grpcAddr, &tls.Config{RootCAs: b.ca.Pool(), ServerName: "localhost",
				Certificates: []tls.Certificate{good.TLS}, NextProtos: protos})
			if err != nil {
				t.Fatalf("dial with ALPN %q: %v", protos, err)
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			n, err := c.Read(make([]byte, 64))
			c.Close()
			if got := n > 0; got != (protos != nil) {
				t.Errorf("ALPN %q: read %d bytes, %v; want the server to answer only with h2", protos, n, err)
			}
		}
	})

	t.Run("keys", func(t *testing.T) {
		conn := b.dialGRPC(t, good)
		for _, tt := range []struct {
			name, key string
			want      codes.Code
		}{
			{"ratelimit:check", b.checkKey, codes.OK},
			{"missing", "", codes.Unauthenticated},
			{"unknown", "sk_" + strings.Repeat("x", 43), codes.Unauthenticated},
			{"lacks the scope", b.otherKey, codes.PermissionDenied},
		} {
			if got := grpcstatus.Code(shouldRateLimit(t, conn, tt.key)); got != tt.want {
				t.Errorf("ShouldRateLimit with the %s key = %v, want %v", tt.name, got, tt.want)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: rlspb.RateLimitService_ServiceDesc.ServiceName})
		if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health Check without a key = %v, %v; want SERVING", resp, err)
		}
	})

	t.Run("rotation", func(t *testing.T) {
		if leaf, err := b.grpcLeaf(t, good); err != nil || leaf.Subject.CommonName != "first" {
			t.Fatalf("gRPC certificate = %v, %v; want the first", leaf, err)
		}
		second := b.ca.Server(t, "second")
		second.Install(t, b.server.CertFile, b.server.KeyFile)
		enginetest.EventuallyNil(t, 10*time.Second, "a new gRPC connection served the second certificate", func() error {
			leaf, err := b.grpcLeaf(t, good)
			if err != nil {
				return enginetest.State(false, "%s", err.Error())
			}
			return enginetest.State(leaf.Subject.CommonName == "second", "%s", leaf.Subject.CommonName)
		})
		enginetest.EventuallyNil(t, 10*time.Second, "the metric to show the second certificate's expiry", func() error {
			resp, err := b.https().Get(b.node.httpURL + "/metrics")
			if err != nil {
				return enginetest.State(false, "%s", err.Error())
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			want := fmt.Sprintf(`sluice_tls_certificate_not_after_seconds{listener="grpc"} %g`, float64(second.Cert.NotAfter.Unix()))
			return enginetest.State(bytes.Contains(body, []byte(want)), "%s", want)
		})
		enginetest.EventuallyNil(t, 10*time.Second, "a new HTTPS connection served the second certificate", func() error {
			resp, err := b.https().Get(b.node.httpURL + "/healthz")
			if err != nil {
				return enginetest.State(false, "%s", err.Error())
			}
			resp.Body.Close()
			cn := resp.TLS.PeerCertificates[0].Subject.CommonName
			return enginetest.State(cn == "second", "%s", cn)
		})
	})

	t.Run("healthcheck", func(t *testing.T) {
		base := []string{"healthcheck", "--http-addr", b.httpsAddr, "--tls-cert-file", b.server.CertFile, "--tls-key-file", b.server.KeyFile}
		other := b.ca.Server(t, "other")
		otherCA := tlstest.NewCA(t, "other CA")
		for _, tt := range []struct {
			name string
			args []string
			want string // in stderr when refused
		}{
			{"the node's own certificate", nil, ""},
			{"the CA", []string{"--ca-file", b.ca.File}, ""},
			{"no verification on loopback", []string{"--insecure-skip-verify"}, ""},
			{"another CA", []string{"--ca-file", otherCA.File}, "certificate signed by unknown authority"},
			{"another certificate file", []string{"--tls-cert-file", other.CertFile, "--tls-key-file", other.KeyFile}, "a certificate other than"},
		} {
			code, out, errOut := runCLI(t, nil, append(base, tt.args...)...)
			if tt.want == "" && (code != 0 || !strings.Contains(out, "200 OK")) {
				t.Errorf("sluice healthcheck with %s = %d %q %q; want 0 and 200 OK", tt.name, code, out, errOut)
			}
			if tt.want != "" && (code != 1 || !strings.Contains(errOut, tt.want)) {
				t.Errorf("sluice healthcheck with %s = %d %q; want 1 and %q", tt.name, code, errOut, tt.want)
			}
		}
		if code, _, errOut := runCLI(t, nil, append(base, "--http-addr", "10.0.0.5:8080", "--insecure-skip-verify")...); code != 1 || !strings.Contains(errOut, "not a loopback address") {
			t.Errorf("--insecure-skip-verify on a remote address = %d %q; want refused", code, errOut)
		}
	})
}
