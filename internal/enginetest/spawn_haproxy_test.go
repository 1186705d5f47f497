package enginetest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestHAProxy: HAProxy forwards to its backend, with X-Forwarded-For under
// ForwardFor and with a PROXY v2 header naming the client under
// SendProxyV2.
func TestHAProxy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  HAProxy
		want string // what the backend sees: "RemoteAddr host|X-Forwarded-For"
	}{
		{"forwardfor", HAProxy{ForwardFor: true}, "127.0.0.1|127.0.0.2"},
		{"send-proxy-v2", HAProxy{SendProxyV2: true}, "127.0.0.2|"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if tt.cfg.SendProxyV2 {
				ln = &proxyproto.Listener{Listener: ln}
			}
			backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				host, _, _ := net.SplitHostPort(r.RemoteAddr)
				fmt.Fprintf(w, "%s|%s", host, r.Header.Get("X-Forwarded-For"))
			})}
			go backend.Serve(ln)
			t.Cleanup(func() { backend.Close() })
			tt.cfg.Backends = []string{ln.Addr().String()}
			hp := StartHAProxy(t, tt.cfg)
			if !strings.HasPrefix(hp.URL(), "http://127.0.0.1:") {
				t.Errorf("URL() = %q, want http://127.0.0.1:port", hp.URL())
			}
			client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
			resp, err := client.Get(hp.URL() + "/x")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if string(b) != tt.want {
				t.Errorf("backend saw %q, want %q", b, tt.want)
			}
		})
	}
}

// TestHAProxyHealthCheck: a backend whose health check fails gets no
// requests, and the gRPC frontend forwards h2c calls to a gRPC backend.
func TestHAProxyHealthCheck(t *testing.T) {
	t.Parallel()
	var backends []string
	for _, ready := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/readyz" {
				w.WriteHeader(ready)
				return
			}
			fmt.Fprint(w, ready)
		}))
		t.Cleanup(srv.Close)
		backends = append(backends, strings.TrimPrefix(srv.URL, "http://"))
	}
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(gln)
	t.Cleanup(gs.Stop)
	cfg := HAProxy{Backends: backends, HealthCheck: "/readyz", GRPCAddr: SpareAddr(t),
		GRPCBackends: []string{gln.Addr().String(), gln.Addr().String()}}
	hp := StartHAProxy(t, cfg)

	// Poll until ten answers in a row come from the ready backend.
	deadline := time.Now().Add(20 * time.Second)
	for streak := 0; streak < 10; {
		if time.Now().After(deadline) {
			t.Fatal("the unready backend still gets requests after 20s")
		}
		resp, err := http.Get(hp.URL() + "/x")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) == "200" {
			streak++
		} else {
			streak = 0
			time.Sleep(50 * time.Millisecond) // polling interval
		}
	}

	conn, err := grpc.NewClient(cfg.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health through haproxy = %v, %v; want SERVING", resp, err)
	}
}
