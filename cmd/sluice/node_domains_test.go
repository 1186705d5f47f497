package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/shorten"
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

// hostGet sends GET base+path with Host host, following no redirect.
func hostGet(t *testing.T, base, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	req.Header.Set("User-Agent", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)")
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("GET %s on %s: %v", path, host, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// linkKeys makes n API keys with the links:write scope in cfg's store,
// before the node starts, and returns their bearer tokens.
func linkKeys(t *testing.T, cfg config.Config, n int) []string {
	t.Helper()
	db, err := openStore(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var toks []string
	for i := range n {
		tok, key, err := auth.NewKey("tenant"+string(rune('a'+i)), []auth.Scope{auth.ScopeLinksWrite}, time.Now(), nil)
		if err != nil || db.CreateAPIKey(t.Context(), key) != nil {
			t.Fatalf("create key: %v", err)
		}
		toks = append(toks, tok)
	}
	return toks
}

// problemField is the first field a problem+json body names, and its detail.
func problemField(raw []byte) (field, detail string) {
	var p struct {
		Detail string `json:"detail"`
		Errors []struct{ Field, Detail string }
	}
	if json.Unmarshal(raw, &p) != nil || len(p.Errors) == 0 {
		return "", p.Detail
	}
	return p.Errors[0].Field, p.Errors[0].Detail
}

// TestDomainsOwnHostsRefused: no host the node answers on can be
// registered as a custom domain, whichever setting names it, in any case,
// with a port or a trailing dot in the setting.
func TestDomainsOwnHostsRefused(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Links.BaseURL = "https://sho.rt:8443"
	cfg.UI.PublicURL = "https://Admin.Example.com./"
	cfg.Notify.Providers.CallbackBaseURL = "https://hooks.example.com/base"
	cfg.AllowedHosts = []string{"API.example.com"}
	n := startNode(t, cfg)
	for _, c := range []struct{ source, domain string }{
		{"links.base_url", "sho.rt"},
		{"ui.public_url", "admin.EXAMPLE.com"},
		{"notify.providers.callback_base_url", "hooks.example.com"},
		{"--allowed-hosts", "api.example.com"},
	} {
		code, raw := call(t, "POST", n.httpURL+"/v1/domains", `{"domain":"`+c.domain+`"}`)
		if field, detail := problemField(raw); code != http.StatusUnprocessableEntity || field != "domain" || !strings.Contains(detail, "answers on itself") {
			t.Errorf("POST /v1/domains %s (%s's host) = %d %s; want 422 naming domain", c.domain, c.source, code, raw)
		}
	}
	if code, raw := call(t, "POST", n.httpURL+"/v1/domains", `{"domain":"go.example.com"}`); code != http.StatusCreated {
		t.Errorf("POST /v1/domains go.example.com = %d %s, want 201", code, raw)
	}
}

// TestDomainsOwnHostRegisteredBefore: a domain registered before the node
// was configured to answer on it is not served as a custom domain (its
// links do not answer there, the node's own do) and the node warns of it
// at start.
func TestDomainsOwnHostRegisteredBefore(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	db, err := openStore(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := db.CreateDomain(t.Context(), shorten.Domain{Name: "admin.example.com", Token: "t", CreatedAt: now, VerifiedAt: now,
		FallbackURL: "https://tenant.example.net/"}, shorten.DomainLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.CreateLinks(t.Context(), []shorten.NewLink{{Domain: "admin.example.com", Code: "spring", URL: "https://tenant.example.net/s", CreatedAt: now}},
		func(int64) (string, error) { return "x", nil }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	cfg.UI.PublicURL = "https://admin.example.com"
	logs := &enginetest.LogBuffer{}
	n := startNodeLogging(t, cfg, newLogger(logs, cfg))
	if code, raw := call(t, "POST", n.httpURL+"/v1/links", `{"url":"https://example.com/own","slug":"spring"}`); code != http.StatusCreated {
		t.Fatalf("POST /v1/links = %d %s", code, raw)
	}
	for _, c := range []struct{ path, want string }{{"/spring", "https://example.com/own"}, {"/login", ""}, {"/nothing", ""}} {
		code, loc := hostGet(t, n.httpURL, "admin.example.com", c.path)
		if strings.Contains(loc, "tenant.example.net") || (c.want != "" && (code != http.StatusFound || loc != c.want)) {
			t.Errorf("GET %s on admin.example.com = %d to %q; want the node's own answer (%q), never the tenant's", c.path, code, loc, c.want)
		}
	}
	enginetest.Eventually(t, time.Minute, "the node warns of the domain that is its own host", func() bool {
		return strings.Contains(logs.String(), "admin.example.com") && strings.Contains(logs.String(), "own hosts")
	})
}

// TestDomainsVerifyOverDNS: with links.domains.verify dns a registration
// is a claim: its codes answer 404 (its fallback unused) and no link can
// be made on it until the TXT record holds its token. Two keys claim the
// same domain; a record with another value or none verifies neither; the
// record holding the second key's token verifies its claim (through the
// CLI) and drops the first's, which can then claim it no more. Removing
// the record afterwards changes nothing. A claim whose record appears is
// verified by the node's own check within links.domains.verify_interval.
func TestDomainsVerifyOverDNS(t *testing.T) {
	t.Parallel()
	dns := enginetest.StartDNS(t)
	cfg := testConfig(t)
	cfg.Links.Domains.Verify, cfg.Links.Domains.Resolver = config.DomainsVerifyDNS, dns.Addr
	cfg.Links.Domains.VerifyInterval = 10 * time.Second
	keys := linkKeys(t, cfg, 2)
	a, b := "Bearer "+keys[0], "Bearer "+keys[1]
	n := startNode(t, cfg)
	domains := n.httpURL + "/v1/domains"

	claim := func(auth string) client.Domain {
		t.Helper()
		code, raw := call(t, "POST", domains, `{"domain":"go.example.com","fallback_url":"https://example.com/home"}`, "Authorization", auth)
		var d client.Domain
		if code != http.StatusCreated || json.Unmarshal(raw, &d) != nil || d.Verified || d.VerifiedAt != nil || len(d.VerificationToken) != 40 ||
			d.VerificationRecord != "_sluice.go.example.com" {
			t.Fatalf("POST /v1/domains = %d %s; want 201, an unverified claim with its token and record name", code, raw)
		}
		return d
	}
	da, db := claim(a), claim(b)
	if da.VerificationToken == db.VerificationToken {
		t.Fatal("two claims share a token")
	}
	if code, raw := call(t, "POST", n.httpURL+"/v1/links", `{"url":"https://example.com/x","slug":"launch","domain":"go.example.com"}`, "Authorization", a); code != 422 ||
		!strings.Contains(string(raw), "_sluice.go.example.com") {
		t.Errorf("POST /v1/links on an unverified domain = %d %s, want 422 naming the record", code, raw)
	}
	if code, raw := call(t, "POST", n.httpURL+"/v1/links", `{"url":"https://example.com/plain","slug":"launch"}`, "Authorization", a); code != 201 {
		t.Fatalf("POST /v1/links = %d %s", code, raw)
	}
	for _, path := range []string{"/launch", "/nothing"} {
		if code, loc := hostGet(t, n.httpURL, "go.example.com", path); code != http.StatusNotFound {
			t.Errorf("GET %s on the unverified domain = %d to %q, want 404 (no link without a domain, no fallback)", path, code, loc)
		}
	}

	verify := func(auth string) (int, client.Domain, []byte) {
		t.Helper()
		code, raw := call(t, "POST", domains+"/go.example.com/verify", "", "Authorization", auth)
		var d client.Domain
		_ = json.Unmarshal(raw, &d)
		return code, d, raw
	}
	if code, d, raw := verify(a); code != 200 || d.Verified || !strings.Contains(d.VerificationError, "no TXT record") {
		t.Errorf("verify without a record = %d %s; want 200, unverified, no record", code, raw)
	}
	envA := map[string]string{"SLUICE_SERVER": n.httpURL, "SLUICE_API_KEY": keys[0]}
	if code, _, errs := runCLI(t, envA, "domains", "verify", "go.example.com"); code != exitRefused || !strings.Contains(errs, "not verified") ||
		!strings.Contains(errs, da.VerificationToken) {
		t.Errorf("sluice domains verify without a record = %d %q; want exit 1 saying what to publish", code, errs)
	}
	dns.SetTXT("_sluice.go.example.com", "someone-else")
	if code, d, raw := verify(a); code != 200 || d.Verified || !strings.Contains(d.VerificationError, "does not hold") {
		t.Errorf("verify with another value = %d %s; want 200, unverified", code, raw)
	}
	dns.SetTXT("_sluice.go.example.com", "v=spf1 -all", db.VerificationToken)
	env := map[string]string{"SLUICE_SERVER": n.httpURL, "SLUICE_API_KEY": keys[1]}
	code, out, errs := runCLI(t, env, "domains", "verify", "go.example.com", "--json")
	var got client.Domain
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || !got.Verified || got.VerifiedAt == nil {
		t.Fatalf("sluice domains verify (the record holds the key's token) = %d %q %q; want verified", code, out, errs)
	}
	// The first key's claim went; the domain is no one else's to claim.
	if code, raw := call(t, "GET", domains+"/go.example.com", "", "Authorization", a); code != 404 {
		t.Errorf("GET the dropped claim = %d %s, want 404", code, raw)
	}
	if code, _, raw := verify(a); code != 404 {
		t.Errorf("verify the dropped claim = %d %s, want 404", code, raw)
	}
	if code, raw := call(t, "POST", domains, `{"domain":"go.example.com"}`, "Authorization", a); code != 409 {
		t.Errorf("claim a verified domain = %d %s, want 409", code, raw)
	}
	if code, raw := call(t, "POST", n.httpURL+"/v1/links", `{"url":"https://example.com/go","slug":"launch","domain":"go.example.com"}`, "Authorization", b); code != 201 {
		t.Fatalf("POST /v1/links on the verified domain = %d %s", code, raw)
	}
	// Removing the record keeps the domain: control is proved once.
	dns.SetTXT("_sluice.go.example.com")
	if code, d, raw := verify(b); code != 200 || !d.Verified {
		t.Errorf("verify after the record went = %d %s, want still verified", code, raw)
	}
	for _, c := range []struct{ path, want string }{{"/launch", "https://example.com/go"}, {"/nothing", "https://example.com/home"}} {
		enginetest.EventuallyNil(t, 30*time.Second, "GET "+c.path+" on the verified domain redirects", func() error {
			code, loc := hostGet(t, n.httpURL, "go.example.com", c.path)
			return enginetest.State(code == http.StatusFound && loc == c.want, "%d to %q, want 302 to %s", code, loc, c.want)
		})
	}

	// The node's own check verifies a claim once its record appears.
	code, raw := call(t, "POST", domains, `{"domain":"auto.example.com"}`, "Authorization", a)
	var auto client.Domain
	if code != 201 || json.Unmarshal(raw, &auto) != nil {
		t.Fatalf("POST /v1/domains auto.example.com = %d %s", code, raw)
	}
	dns.SetTXT(auto.VerificationRecord, auto.VerificationToken)
	enginetest.EventuallyNil(t, 2*time.Minute, "the scheduled check verifies auto.example.com", func() error {
		code, raw, err := tryCall("GET", domains+"/auto.example.com", "", "Authorization", a)
		if err != nil {
			return err
		}
		return enginetest.State(code == 200 && strings.Contains(string(raw), `"verified":true`), "%d %s", code, raw)
	})
}

// TestDomainsCap: one key holds at most links.domains.max_per_owner
// domains and claims, and the server links.domains.max; past either a
// registration is 429 problem+json saying which, and a delete makes room.
func TestDomainsCap(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Links.Domains.MaxPerOwner, cfg.Links.Domains.Max = 2, 3
	keys := linkKeys(t, cfg, 2)
	n := startNode(t, cfg)
	add := func(key, domain string) (int, []byte) {
		return call(t, "POST", n.httpURL+"/v1/domains", `{"domain":"`+domain+`"}`, "Authorization", "Bearer "+key)
	}
	for _, d := range []string{"a.example.com", "b.example.com"} {
		if code, raw := add(keys[0], d); code != 201 {
			t.Fatalf("POST /v1/domains %s = %d %s", d, code, raw)
		}
	}
	code, raw := add(keys[0], "c.example.com")
	if _, detail := problemField(raw); code != http.StatusTooManyRequests || !strings.Contains(detail, "links.domains.max_per_owner") {
		t.Errorf("a third domain for one key = %d %s; want 429 naming links.domains.max_per_owner", code, raw)
	}
	if code, raw := add(keys[1], "c.example.com"); code != 201 {
		t.Fatalf("another key's domain = %d %s", code, raw)
	}
	code, raw = add(keys[1], "d.example.com")
	if _, detail := problemField(raw); code != http.StatusTooManyRequests || !strings.Contains(detail, "links.domains.max") {
		t.Errorf("a fourth domain on the server = %d %s; want 429 naming links.domains.max", code, raw)
	}
	c := client.New(n.httpURL, keys[0])
	if err := c.DeleteDomain(context.Background(), "a.example.com"); err != nil {
		t.Fatal(err)
	}
	if code, raw := add(keys[1], "d.example.com"); code != 201 {
		t.Errorf("POST /v1/domains after a delete = %d %s, want 201", code, raw)
	}
}
