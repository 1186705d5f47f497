package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// TestGatewayTLSAndGRPCKeyFailures runs a node with --tls-cert-file, a
// gateway, --grpc-require-key and --auth-failures-per-minute 2: the
// gateway serves the node's certificate over HTTPS to its upstream, and
// after 2 bad keys on gRPC a valid one is refused with RESOURCE_EXHAUSTED,
// the HTTP API then refusing a bad key from that address with 429 (one
// budget).
func TestGatewayTLSAndGRPCKeyFailures(t *testing.T) {
	t.Parallel()
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") })}
	upLn := listenLocal(t)
	go up.Serve(upLn)
	t.Cleanup(func() { up.Close() })
	b := &tlsBundle{ca: tlstest.NewCA(t, "server CA")}
	b.server = b.ca.Server(t, "node")
	cfg := testConfig(t)
	cfg.TLSCertFile, cfg.TLSKeyFile = b.server.CertFile, b.server.KeyFile
	cfg.GRPCRequireKey, cfg.AuthFailures = true, 2
	cfg.Gateway.Listen, cfg.Gateway.Upstream = "127.0.0.1:0", "http://"+upLn.Addr().String()
	b.node = startNode(t, cfg)
	gwAddr := b.node.gatewayAddr
	b.node.httpURL = "https://" + strings.TrimPrefix(b.node.httpURL, "http://")
	admin := b.createKey(t, "admin", "")
	check := b.createKey(t, "ratelimit:check", admin)

	resp, err := b.https().Get("https://" + gwAddr + "/hello")
	if err != nil {
		t.Fatalf("GET through the gateway over HTTPS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "up" || resp.TLS == nil {
		t.Fatalf("GET through the gateway = %d %q (TLS %v), want 200 from the upstream over TLS", resp.StatusCode, body, resp.TLS != nil)
	}

	conn := b.dialGRPC(t, nil)
	bad := "sk_" + strings.Repeat("C", 43)
	for i, want := range []codes.Code{codes.OK, codes.Unauthenticated, codes.Unauthenticated, codes.ResourceExhausted} {
		key := bad
		if i == 0 {
			key = check
		}
		if got := grpcstatus.Code(shouldRateLimit(t, conn, key)); got != want {
			t.Fatalf("call %d: %v, want %v", i, got, want)
		}
	}
	if got := grpcstatus.Code(shouldRateLimit(t, conn, check)); got != codes.ResourceExhausted {
		t.Fatalf("valid key while blocked: %v, want ResourceExhausted", got)
	}

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, b.node.httpURL+"/v1/keys", nil)
	req.Header.Set("Authorization", "Bearer "+bad)
	resp, err = b.https().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("HTTP bad key after the gRPC failures = %d, want 429 (one budget per address)", resp.StatusCode)
	}
}
