package enginetest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/pires/go-proxyproto"
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
