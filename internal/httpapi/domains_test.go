package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/shorten"
)

func TestDomainsLifecycle(t *testing.T) {
	t.Parallel()
	b, _ := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	other := b.addKey(t, auth.ScopeLinksWrite)

	resp := b.do(call{method: "POST", path: "/v1/domains", key: key, body: `{"domain":"Go.Example.COM","fallback_url":"https://example.com/home"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/domains = %d: %+v", resp.StatusCode, decodeProblem(t, resp))
	}
	var d domainResponse
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || d.Domain != "go.example.com" || d.FallbackURL != "https://example.com/home" ||
		d.CreatedAt.IsZero() || resp.Header.Get("Location") != "/v1/domains/go.example.com" {
		t.Errorf("created %+v (%v), Location %q", d, err, resp.Header.Get("Location"))
	}
	if r := b.do(call{method: "POST", path: "/v1/domains", key: other, body: `{"domain":"xn--bcher-kva.example"}`}); r.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/domains (other) = %d", r.StatusCode)
	}

	// Someone else's, or taken again: refused.
	if r := b.do(call{method: "POST", path: "/v1/domains", key: other, body: `{"domain":"go.example.com"}`}); r.StatusCode != http.StatusConflict ||
		decodeProblem(t, r).Errors[0].Field != "domain" {
		t.Errorf("POST a taken domain = %d, want 409 naming domain", r.StatusCode)
	}
	resp = b.do(call{method: "POST", path: "/v1/links", key: other, body: `{"url":"https://example.com/x","slug":"spring","domain":"go.example.com"}`})
	if resp.StatusCode != http.StatusUnprocessableEntity || decodeProblem(t, resp).Errors[0].Field != "domain" {
		t.Errorf("POST /v1/links on another caller's domain = %d, want 422 naming domain", resp.StatusCode)
	}
	if r := b.do(call{method: "DELETE", path: "/v1/domains/go.example.com", key: other}); r.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE another caller's domain = %d, want 404", r.StatusCode)
	}

	// Each caller lists its own.
	var page struct {
		Items []domainResponse `json:"items"`
	}
	if err := json.NewDecoder(b.do(call{method: "GET", path: "/v1/domains", key: key}).Body).Decode(&page); err != nil ||
		len(page.Items) != 1 || page.Items[0].Domain != "go.example.com" {
		t.Errorf("GET /v1/domains = %+v, %v; want go.example.com only", page, err)
	}

	// The same slug on no domain and on the domain: two links, each on its host.
	resp = b.do(call{method: "POST", path: "/v1/links", key: key, body: `{"url":"https://example.com/plain","slug":"spring"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/links = %d", resp.StatusCode)
	}
	resp = b.do(call{method: "POST", path: "/v1/links", key: key, body: `{"url":"https://example.com/go","slug":"spring","domain":"GO.example.com"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/links on the domain = %d: %+v", resp.StatusCode, decodeProblem(t, resp))
	}
	l := decodeLink(t, resp)
	if l.Domain != "go.example.com" || l.ShortURL != "https://go.example.com/spring" || resp.Header.Get("Location") != "/v1/links/spring?domain=go.example.com" {
		t.Errorf("created %+v, Location %q", l, resp.Header.Get("Location"))
	}
	if r := b.do(call{method: "POST", path: "/v1/links", key: key, body: `{"url":"https://example.com/again","slug":"spring","domain":"go.example.com"}`}); r.StatusCode != http.StatusConflict {
		t.Errorf("the slug again on the domain = %d, want 409", r.StatusCode)
	}
	for _, c := range []struct{ host, want string }{
		{"go.example.com", "https://example.com/go"},
		{"GO.example.com:8443", "https://example.com/go"},
		{"go.example.com.", "https://example.com/go"},
		{"sho.rt", "https://example.com/plain"},
		{"localhost:8080", "https://example.com/plain"},
		// Hosts a client makes up never reach a domain's links.
		{"go.example.com/spring", "https://example.com/plain"},
		{"[::1]:8080", "https://example.com/plain"},
		{strings.Repeat("a", 2000) + ".go.example.com", "https://example.com/plain"},
		{"go.example.com\x00", "https://example.com/plain"},
	} {
		r := b.do(call{method: "GET", path: "/spring", host: c.host, userAgent: browser})
		if r.StatusCode != http.StatusFound || r.Header.Get("Location") != c.want {
			t.Errorf("GET /spring on %s = %d to %q, want 302 to %s", c.host, r.StatusCode, r.Header.Get("Location"), c.want)
		}
	}
	// An unknown code on the domain goes to its fallback; elsewhere, 404.
	if r := b.do(call{method: "GET", path: "/nothing", host: "go.example.com", userAgent: browser}); r.StatusCode != http.StatusFound ||
		r.Header.Get("Location") != "https://example.com/home" {
		t.Errorf("GET /nothing on the domain = %d to %q, want 302 to the fallback", r.StatusCode, r.Header.Get("Location"))
	}
	if r := b.do(call{method: "GET", path: "/spring", host: "xn--bcher-kva.example", userAgent: browser}); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET /spring on a domain without it nor a fallback = %d, want 404", r.StatusCode)
	}
	if r := b.do(call{method: "GET", path: "/nothing", host: "sho.rt", userAgent: browser}); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing = %d, want 404", r.StatusCode)
	}

	// The fallback changes (and clears) in place; only the owner may read
	// or change it, and a bad URL or an empty change is refused.
	for _, c := range []struct {
		key, body string
		status    int
		field     string
	}{
		{other, `{"fallback_url":"https://example.com/x"}`, http.StatusNotFound, ""},
		{key, `{"fallback_url":"javascript:alert(1)"}`, http.StatusUnprocessableEntity, "fallback_url"},
		{key, `{}`, http.StatusUnprocessableEntity, "fallback_url"},
		{key, `{"fallback_url":"https://example.com/x","domain":"other.example"}`, http.StatusBadRequest, ""},
		{key, `{"fallback_url":"https://example.com/spring-sale"}`, http.StatusOK, ""},
	} {
		r := b.do(call{method: "PATCH", path: "/v1/domains/GO.example.com", key: c.key, body: c.body})
		if r.StatusCode != c.status {
			t.Errorf("PATCH %s = %d, want %d", c.body, r.StatusCode, c.status)
			continue
		}
		if c.field != "" {
			if p := decodeProblem(t, r); len(p.Errors) == 0 || p.Errors[0].Field != c.field {
				t.Errorf("PATCH %s = %+v, want an error naming %s", c.body, p, c.field)
			}
		}
	}
	if r := b.do(call{method: "GET", path: "/v1/domains/go.example.com", key: other}); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET another caller's domain = %d, want 404", r.StatusCode)
	}
	if err := json.NewDecoder(b.do(call{method: "GET", path: "/v1/domains/go.example.com", key: key}).Body).Decode(&d); err != nil ||
		d.FallbackURL != "https://example.com/spring-sale" {
		t.Errorf("GET /v1/domains/go.example.com = %+v, %v; want the new fallback", d, err)
	}
	if r := b.do(call{method: "GET", path: "/nothing", host: "go.example.com", userAgent: browser}); r.StatusCode != http.StatusFound ||
		r.Header.Get("Location") != "https://example.com/spring-sale" {
		t.Errorf("GET /nothing after the change = %d to %q, want 302 to the new fallback", r.StatusCode, r.Header.Get("Location"))
	}
	if r := b.do(call{method: "PATCH", path: "/v1/domains/go.example.com", key: key, body: `{"fallback_url":null}`}); r.StatusCode != http.StatusOK {
		t.Errorf("PATCH null = %d", r.StatusCode)
	}
	if r := b.do(call{method: "GET", path: "/nothing", host: "go.example.com", userAgent: browser}); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing after the fallback was cleared = %d, want 404", r.StatusCode)
	}

	// Listing by domain, reading and deleting by ?domain=.
	var links struct {
		Items []linkResponse `json:"items"`
	}
	if err := json.NewDecoder(b.do(call{method: "GET", path: "/v1/links?domain=go.example.com", key: key}).Body).Decode(&links); err != nil ||
		len(links.Items) != 1 || links.Items[0].URL != "https://example.com/go" {
		t.Errorf("GET /v1/links?domain=go.example.com = %+v, %v", links, err)
	}
	if got := decodeLink(t, b.do(call{method: "GET", path: "/v1/links/spring?domain=go.example.com", key: key})); got.URL != "https://example.com/go" {
		t.Errorf("GET /v1/links/spring?domain=go.example.com = %+v", got)
	}
	if got := decodeLink(t, b.do(call{method: "GET", path: "/v1/links/spring", key: key})); got.URL != "https://example.com/plain" || got.Domain != "" {
		t.Errorf("GET /v1/links/spring = %+v", got)
	}
	if r := b.do(call{method: "DELETE", path: "/v1/domains/go.example.com", key: key}); r.StatusCode != http.StatusConflict {
		t.Errorf("DELETE a domain with links = %d, want 409", r.StatusCode)
	}
	if r := b.do(call{method: "DELETE", path: "/v1/links/spring?domain=go.example.com", key: key}); r.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE the domain's link = %d", r.StatusCode)
	}
	if r := b.do(call{method: "GET", path: "/spring", host: "sho.rt", userAgent: browser}); r.Header.Get("Location") != "https://example.com/plain" {
		t.Errorf("the link without a domain went with the domain's: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	if r := b.do(call{method: "DELETE", path: "/v1/domains/go.example.com", key: key}); r.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /v1/domains/go.example.com = %d", r.StatusCode)
	}
	// Once removed, the host answers the links without a domain.
	if r := b.do(call{method: "GET", path: "/spring", host: "go.example.com", userAgent: browser}); r.StatusCode != http.StatusFound ||
		r.Header.Get("Location") != "https://example.com/plain" {
		t.Errorf("GET /spring on a removed domain = %d to %q", r.StatusCode, r.Header.Get("Location"))
	}
	if r := b.do(call{method: "DELETE", path: "/v1/domains/go.example.com", key: key}); r.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE again = %d, want 404", r.StatusCode)
	}
}

func TestDomainsRefused(t *testing.T) {
	t.Parallel()
	b, _ := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	notify := b.addKey(t, auth.ScopeNotifySend)
	for _, c := range []struct {
		body   string
		status int
		field  string
	}{
		{`{"domain":""}`, 422, "domain"},
		{`{"domain":"example"}`, 422, "domain"},
		{`{"domain":"go.example.com:8080"}`, 422, "domain"},
		{`{"domain":"https://go.example.com"}`, 422, "domain"},
		{`{"domain":"go.example.com/x"}`, 422, "domain"},
		{`{"domain":"10.0.0.1"}`, 422, "domain"},
		{`{"domain":"[::1]"}`, 422, "domain"},
		{`{"domain":"go.example.com."}`, 422, "domain"},
		{`{"domain":"-go.example.com"}`, 422, "domain"},
		{`{"domain":"go_x.example.com"}`, 422, "domain"},
		{`{"domain":"` + strings.Repeat("a", 64) + `.example.com"}`, 422, "domain"},
		{`{"domain":"sho.rt"}`, 422, "domain"},
		{`{"domain":"x.localhost"}`, 422, "domain"},
		{`{"domain":"go.example.com","fallback_url":"http://10.0.0.1/"}`, 422, "fallback_url"},
		{`{"domain":"go.example.com","extra":1}`, 400, ""},
	} {
		r := b.do(call{method: "POST", path: "/v1/domains", key: key, body: c.body})
		p := decodeProblem(t, r)
		if r.StatusCode != c.status || (c.field != "" && (len(p.Errors) == 0 || p.Errors[0].Field != c.field)) {
			t.Errorf("POST /v1/domains %s = %d %+v, want %d naming %q", c.body, r.StatusCode, p, c.status, c.field)
		}
	}
	// Unicode names are stored in their ASCII form.
	r := b.do(call{method: "POST", path: "/v1/domains", key: key, body: `{"domain":"Bücher.example"}`})
	var d domainResponse
	if err := json.NewDecoder(r.Body).Decode(&d); r.StatusCode != http.StatusCreated || err != nil || d.Domain != "xn--bcher-kva.example" {
		t.Errorf("POST Bücher.example = %d %+v, want xn--bcher-kva.example", r.StatusCode, d)
	}
	if r := b.do(call{method: "GET", path: "/v1/domains", key: notify}); r.StatusCode != http.StatusForbidden {
		t.Errorf("GET /v1/domains without links:write = %d, want 403", r.StatusCode)
	}
}

// TestDomainsUnknownCodeLimit: a client's unknown-code limit on one host
// leaves its limit on a custom domain whole (the setup allows 5 a minute).
func TestDomainsUnknownCodeLimit(t *testing.T) {
	t.Parallel()
	b, _ := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	if r := b.do(call{method: "POST", path: "/v1/domains", key: key, body: `{"domain":"go.example.com"}`}); r.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/domains = %d", r.StatusCode)
	}
	limited := func(host string) int {
		for i := range 10 {
			r := b.do(call{method: "GET", path: "/nope" + string(rune('a'+i)), host: host, remote: "203.0.113.7:4000", userAgent: browser})
			if r.StatusCode == http.StatusTooManyRequests {
				decodeProblem(t, r)
				return i
			}
			if r.StatusCode != http.StatusNotFound {
				t.Fatalf("GET unknown code on %s = %d, want 404 or 429", host, r.StatusCode)
			}
		}
		return -1
	}
	if n := limited("sho.rt"); n != 5 {
		t.Errorf("on sho.rt the client was limited after %d unknown codes, want 5", n)
	}
	if n := limited("go.example.com"); n != 5 {
		t.Errorf("on go.example.com the client was limited after %d unknown codes, want 5 of its own", n)
	}
}

// TestDomainsBadDomainQuery: a ?domain= that is no host name names no
// link (404 problem), on every engine.
func TestDomainsBadDomainQuery(t *testing.T) {
	t.Parallel()
	b, _ := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	if r := b.do(call{method: "POST", path: "/v1/links", key: key, body: `{"url":"https://example.com/plain","slug":"spring"}`}); r.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/links = %d", r.StatusCode)
	}
	for _, q := range []string{"%00", "a:b", "example"} {
		r := b.do(call{method: "GET", path: "/v1/links/spring?domain=" + q, key: key})
		if r.StatusCode != http.StatusNotFound {
			t.Errorf("GET /v1/links/spring?domain=%s = %d, want 404", q, r.StatusCode)
		}
		decodeProblem(t, r)
	}
	if r := b.do(call{method: "GET", path: "/v1/links?domain=a:b", key: key}); r.StatusCode != http.StatusBadRequest || decodeProblem(t, r).Errors[0].Field != "domain" {
		t.Errorf("GET /v1/links?domain=a:b = %d, want 400 naming domain", r.StatusCode)
	}
}

// TestDomainsClickNamesTheDomain: a click on a custom domain's link
// reaches Options.OnClicks (the link.clicked event) with the domain, one
// on the link without a domain without it.
func TestDomainsClickNamesTheDomain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	heard := make(chan shorten.Click, 4)
	svc := newLinks(t, shorten.Options{Store: b.db, OnClicks: func(_ context.Context, cs []shorten.Click) {
		for _, c := range cs {
			heard <- c
		}
	}})
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Links: svc})
	for _, body := range []string{`{"domain":"go.example.com"}`} {
		if r := b.do(call{method: "POST", path: "/v1/domains", body: body}); r.StatusCode != http.StatusCreated {
			t.Fatalf("POST /v1/domains = %d", r.StatusCode)
		}
	}
	for _, body := range []string{`{"url":"https://example.com/a","slug":"spring","domain":"go.example.com"}`, `{"url":"https://example.com/b","slug":"spring"}`} {
		if r := b.do(call{method: "POST", path: "/v1/links", body: body}); r.StatusCode != http.StatusCreated {
			t.Fatalf("POST /v1/links %s = %d", body, r.StatusCode)
		}
	}
	for _, host := range []string{"go.example.com", "sho.rt"} {
		if r := b.do(call{method: "GET", path: "/spring", host: host, userAgent: browser}); r.StatusCode != http.StatusFound {
			t.Fatalf("GET /spring on %s = %d", host, r.StatusCode)
		}
	}
	if err := svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 2 {
		select {
		case c := <-heard:
			got[c.Domain+"/"+c.Code] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("heard %v, want two clicks", got)
		}
	}
	if !got["go.example.com/spring"] || !got["/spring"] {
		t.Errorf("clicks heard %v, want one on go.example.com and one without a domain", got)
	}
}

// TestDomainVerifyRoute: with verification off a domain is verified as it
// is registered, and its answers carry the record to create and its token;
// POST .../verify answers it as it stands, 404 for another key's or none.
func TestDomainVerifyRoute(t *testing.T) {
	t.Parallel()
	b, _ := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	other := b.addKey(t, auth.ScopeLinksWrite)
	if r := b.do(call{method: "POST", path: "/v1/domains", key: key, body: `{"domain":"go.example.com"}`}); r.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/domains = %d", r.StatusCode)
	}
	resp := b.do(call{method: "POST", path: "/v1/domains/go.example.com/verify", key: key})
	var d domainResponse
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK || !d.Verified || d.VerifiedAt == nil ||
		d.VerificationRecord != "_sluice.go.example.com" || len(d.VerificationToken) != 40 || d.VerificationError != "" {
		t.Errorf("POST .../verify = %d %+v (%v); want 200, verified, with the record and token", resp.StatusCode, d, err)
	}
	for _, c := range []struct{ key, path string }{{other, "/v1/domains/go.example.com/verify"}, {key, "/v1/domains/none.example.com/verify"}} {
		if r := b.do(call{method: "POST", path: c.path, key: c.key}); r.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s = %d, want 404", c.path, r.StatusCode)
		}
	}
	if r := b.do(call{method: "POST", path: "/v1/domains", key: key, body: `{"domain":"sho.rt"}`}); r.StatusCode != http.StatusUnprocessableEntity ||
		decodeProblem(t, r).Errors[0].Field != "domain" {
		t.Errorf("POST /v1/domains sho.rt (the base URL's host) = %d, want 422 naming domain", r.StatusCode)
	}
}
