package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sluicehq/sluice/internal/shorten"
)

// BenchmarkRedirectRules is BenchmarkRedirect for a plain link and for a
// link with five rules (OS, device and language, country, query, and the
// A/B split that finally matches), side by side: what rule evaluation adds
// to a redirect.
func BenchmarkRedirectRules(b *testing.B) {
	bd := setup(b)
	codec, _ := shorten.NewCodec([]byte("k"), 7)
	geo := tableGeo{netip.MustParseAddr("192.0.2.1"): "US"}
	svc, err := shorten.New(shorten.Options{Store: bd.db, Codec: codec, BaseURL: "https://sho.rt", ClickBuffer: 1 << 30, Geo: geo})
	if err != nil {
		b.Fatal(err)
	}
	srv := New(Options{Logger: bd.srv.log, Keys: bd.db, Links: svc})
	for _, slug := range []string{"plain", "ruled"} {
		if _, err := svc.Create(b.Context(), shorten.CreateRequest{URL: "https://example.com/page", Slug: slug}); err != nil {
			b.Fatal(err)
		}
	}
	rules := []shorten.Rule{
		{Name: "ios", If: shorten.Conditions{OS: []string{"ios"}}, URL: "https://apps.example.com/app"},
		{If: shorten.Conditions{Device: []string{"mobile"}, Language: []string{"de"}}, URL: "https://example.de/"},
		{If: shorten.Conditions{Country: []string{"FR", "BE"}}, URL: "https://example.fr/"},
		{If: shorten.Conditions{Query: map[string]string{"utm_source": "x"}}, URL: "https://example.com/x"},
		{Name: "ab", Split: []shorten.Arm{{URL: "https://example.com/a", Weight: 70}, {URL: "https://example.com/b", Weight: 30}}},
	}
	if _, err := svc.SetRules(b.Context(), shorten.Caller{Admin: true}, "ruled", rules); err != nil {
		b.Fatal(err)
	}
	for _, slug := range []string{"plain", "ruled"} {
		b.Run(slug, func(b *testing.B) {
			req := httptest.NewRequest("GET", "/"+slug+"?utm_source=y", nil)
			req.RemoteAddr = "192.0.2.1:4444"
			req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0")
			req.Header.Set("Accept-Language", "en-US,en;q=0.9,de;q=0.8")
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
