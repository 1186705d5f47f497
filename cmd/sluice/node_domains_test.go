package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/tlsconf/tlstest"
)

// TestDomainsTwoNodes: a custom domain registered and a link created on
// it on node A redirect by Host on node B, which had read the domains
// (none yet) before: the domain change crosses on NATS, not after
// links.cache_ttl. The same slug without a domain stays its own link.
func TestDomainsTwoNodes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	a, b := startTwoNodes(t, cfg)

	hostGet := func(base, host, path string) (int, string, error) {
		req, err := http.NewRequest("GET", base+path, nil)
		if err != nil {
			return 0, "", err
		}
		req.Host = host
		req.Header.Set("User-Agent", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)")
		resp, err := noFollow.Do(req)
		if err != nil {
			return 0, "", err
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location"), nil
	}
	if code, _, err := hostGet(b.httpURL, "go.example.com", "/spring"); err != nil || code != http.StatusNotFound {
		t.Fatalf("GET /spring on B before any link = %d, %v; want 404", code, err)
	}
	if code, raw := call(t, "POST", a.httpURL+"/v1/links", `{"url":"https://example.com/plain","slug":"spring"}`); code != 201 {
		t.Fatalf("POST /v1/links on A = %d %s", code, raw)
	}
	if code, raw := call(t, "POST", a.httpURL+"/v1/domains", `{"domain":"go.example.com","fallback_url":"https://example.com/home"}`); code != 201 {
		t.Fatalf("POST /v1/domains on A = %d %s", code, raw)
	}
	code, raw := call(t, "POST", a.httpURL+"/v1/links", `{"url":"https://example.com/go","slug":"spring","domain":"go.example.com"}`)
	if code != 201 || !strings.Contains(string(raw), `"short_url":"http://go.example.com/spring"`) {
		t.Fatalf("POST /v1/links on the domain on A = %d %s", code, raw)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "node B redirects the domain's link by Host", func() error {
		code, loc, err := hostGet(b.httpURL, "go.example.com:8080", "/spring")
		if err != nil {
			return err
		}
		return enginetest.State(code == http.StatusFound && loc == "https://example.com/go", "%d to %q", code, loc)
	})
	for _, c := range []struct{ host, path, want string }{
		{"go.example.com", "/nothing", "https://example.com/home"},
		{"127.0.0.1", "/spring", "https://example.com/plain"},
	} {
		if code, loc, err := hostGet(b.httpURL, c.host, c.path); err != nil || code != http.StatusFound || loc != c.want {
			t.Errorf("GET %s on %s on node B = %d to %q (%v), want 302 to %s", c.path, c.host, code, loc, err, c.want)
		}
	} // A fallback changed on A is B's within the announcement's delay
	// (B's domain list is cached for links.cache_ttl otherwise).
	if code, raw := call(t, "PATCH", a.httpURL+"/v1/domains/go.example.com", `{"fallback_url":"https://example.com/sale"}`); code != 200 {
		t.Fatalf("PATCH /v1/domains/go.example.com on A = %d %s", code, raw)
	}
	enginetest.EventuallyNil(t, 10*time.Second, "node B uses the domain's new fallback", func() error {
		code, loc, err := hostGet(b.httpURL, "go.example.com", "/nothing")
		if err != nil {
			return err
		}
		return enginetest.State(code == http.StatusFound && loc == "https://example.com/sale", "%d to %q", code, loc)
	})
}

// TestDomainsOverTLSBySNI: a node given two certificates serves the custom
// domain's to a client naming it, which then follows the domain's link,
// and its own to a client naming localhost.
func TestDomainsOverTLSBySNI(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "server CA")
	base, short := ca.Server(t, "base"), ca.ServerFor(t, "short", "go.example.com")
	cfg := testConfig(t)
	cfg.TLSCertFile, cfg.TLSKeyFile = base.CertFile+","+short.CertFile, base.KeyFile+","+short.KeyFile
	cfg.Links.BaseURL = "https://sho.rt"
	n := startNode(t, cfg)
	addr := strings.TrimPrefix(n.httpURL, "http://")
	get := func(sni, host, path, body string) (*http.Response, string) {
		t.Helper()
		hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: sni}}}
		method := "GET"
		var rd io.Reader
		if body != "" {
			method, rd = "POST", strings.NewReader(body)
		}
		req, err := http.NewRequest(method, "https://"+addr+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s naming %s: %v", method, path, sni, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	if r, b := get("localhost", "localhost", "/v1/domains", `{"domain":"go.example.com"}`); r.StatusCode != 201 || r.TLS.PeerCertificates[0].Subject.CommonName != "base" {
		t.Fatalf("POST /v1/domains naming localhost = %d %s, certificate %q", r.StatusCode, b, r.TLS.PeerCertificates[0].Subject.CommonName)
	}
	if r, b := get("localhost", "localhost", "/v1/links", `{"url":"https://example.com/go","slug":"spring","domain":"go.example.com"}`); r.StatusCode != 201 ||
		!strings.Contains(b, `"short_url":"https://go.example.com/spring"`) {
		t.Fatalf("POST /v1/links = %d %s, want the domain's https short URL", r.StatusCode, b)
	}
	// The health check pins the first certificate of the list, which the
	// node serves to a client naming no host.
	if code, out, errOut := runCLI(t, nil, "healthcheck", "--http-addr", addr, "--tls-cert-file", cfg.TLSCertFile, "--tls-key-file", cfg.TLSKeyFile); code != 0 ||
		!strings.Contains(out, "200 OK") {
		t.Errorf("sluice healthcheck with two certificates = %d %q %q; want 0 and 200 OK", code, out, errOut)
	}
	r, _ := get("go.example.com", "go.example.com", "/spring", "")
	if r.StatusCode != http.StatusFound || r.Header.Get("Location") != "https://example.com/go" || r.TLS.PeerCertificates[0].Subject.CommonName != "short" {
		t.Errorf("GET /spring naming go.example.com = %d to %q with certificate %q; want 302 to the target with the domain's",
			r.StatusCode, r.Header.Get("Location"), r.TLS.PeerCertificates[0].Subject.CommonName)
	}
}
