package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/internal/shorten"
)

// BenchmarkRedirect measures the frame and the redirect handler for a
// cached link, without the network: the part of a redirect Sluice owns.
// BenchmarkRedirect: a redirect on the default host, and the same on a
// custom domain (resolved by Host), side by side.
func BenchmarkRedirect(b *testing.B) {
	for _, domain := range []string{"", "go.example.com"} {
		name := "default"
		if domain != "" {
			name = "domain"
		}
		b.Run(name, func(b *testing.B) {
			bd := setup(b)
			codec, _ := shorten.NewCodec([]byte("k"), 7)
			svc, err := shorten.New(shorten.Options{Store: bd.db, Codec: codec, BaseURL: "https://sho.rt", ClickBuffer: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			srv := New(Options{Logger: bd.srv.log, Keys: bd.db, Links: svc})
			if domain != "" {
				if _, err := svc.CreateDomain(b.Context(), shorten.Caller{Admin: true}, domain, ""); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := svc.Create(b.Context(), shorten.CreateRequest{URL: "https://example.com/page", Slug: "bench", Domain: domain, Admin: true}); err != nil {
				b.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/bench", nil)
			if domain != "" {
				req.Host = domain
			}
			req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0")
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := discardWriter{h: http.Header{}}
					srv.ServeHTTP(&w, req)
					if w.status != http.StatusFound {
						b.Fatalf("status %d", w.status)
					}
				}
			})
		})
	}
}

type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
