package httpapi

import (
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/auth"
)

// TestRootRedirectsToDashboard: GET / on the API's own host is 302 to
// /ui/; on a registered custom short domain it stays a 404.
func TestRootRedirectsToDashboard(t *testing.T) {
	t.Parallel()
	b, _ := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	if r := b.do(call{method: "POST", path: "/v1/domains", key: key, body: `{"domain":"go.example.com","fallback_url":"https://example.com/home"}`}); r.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/domains = %d", r.StatusCode)
	}
	for _, c := range []struct {
		method, host string
		want         int
	}{
		{"GET", "localhost:8080", http.StatusFound},
		{"HEAD", "127.0.0.1", http.StatusFound},
		{"GET", "sho.rt", http.StatusFound},
		{"GET", "go.example.com", http.StatusNotFound},
		{"GET", "GO.example.com:8443", http.StatusNotFound},
	} {
		r := b.do(call{method: c.method, path: "/", host: c.host})
		if r.StatusCode != c.want {
			t.Errorf("%s / on %s = %d, want %d", c.method, c.host, r.StatusCode, c.want)
			continue
		}
		if c.want == http.StatusFound && r.Header.Get("Location") != "/ui/" {
			t.Errorf("%s / on %s: Location %q, want /ui/", c.method, c.host, r.Header.Get("Location"))
		}
		if c.want == http.StatusNotFound && c.method == "GET" {
			decodeProblem(t, r)
		}
	}
	// Paths under / other than / itself are untouched: a code is a redirect.
	if r := b.do(call{method: "GET", path: "/nosuchcode", host: "localhost"}); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nosuchcode = %d, want 404", r.StatusCode)
	}
}
