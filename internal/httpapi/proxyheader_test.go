package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit/httplimit"
)

// Behind a proxy that writes only X-Forwarded-For (--trusted-proxy-header
// x-forwarded-for), a client that adds a Forwarded header of its own,
// disagreeing or malformed, is still counted as itself: it neither
// escapes its own bucket nor lands in the proxy's.
func TestClientAddingForwardedStaysItself(t *testing.T) {
	t.Parallel()
	b, svc := setupLinks(t)
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Links: svc,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, ProxyHeader: httplimit.HeaderXForwardedFor})
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	client := &http.Client{Timeout: 10 * time.Second}
	lookup := func(xff, fwd string) int {
		req, err := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/nothing", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", xff) // what the proxy appended
		if fwd != "" {
			req.Header.Set("Forwarded", fwd) // what the client sent
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, fwd := range []string{"for=6.6.6.6", "for=127.0.0.1", `for="[::1`, "nonsense", "for=_hidden"} {
		if got := lookup("198.51.100.1", fwd); got != 404 {
			t.Fatalf("client's unknown code #%d with Forwarded %q = %d, want 404", i, fwd, got)
		}
	}
	if got := lookup("198.51.100.1", ""); got != 429 {
		t.Errorf("the same client without its Forwarded header = %d, want 429 (its tries were its own)", got)
	}
	if got := lookup("198.51.100.2", ""); got != 404 {
		t.Errorf("another client behind the proxy = %d, want 404", got)
	}
}
