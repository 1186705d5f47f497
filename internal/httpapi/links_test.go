package httpapi

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/shorten"
	"github.com/sluicehq/sluice/ratelimit"
)

// setupLinks is setup with the shortener on the same SQLite store.
func setupLinks(t testing.TB, trusted ...netip.Prefix) (*bundle, *shorten.Service) {
	t.Helper()
	b := setup(t)
	svc := newLinks(t, shorten.Options{Store: b.db, Limiter: unknownCodeLimiter(t), Targets: ownHost})
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Links: svc, TrustedProxies: trusted})
	return b, svc
}

// ownHost is the link targets' policy of the tests: links lead anywhere
// but to the shortener's own host, sho.rt.
var ownHost = shorten.TargetPolicy{OwnHosts: []string{"sho.rt"}}

// newLinks is a shortener on opts with the tests' code key, the base URL
// https://sho.rt and no logs.
func newLinks(t testing.TB, opts shorten.Options) *shorten.Service {
	t.Helper()
	codec, err := shorten.NewCodec([]byte("test key"), 7)
	if err != nil {
		t.Fatal(err)
	}
	opts.Codec, opts.BaseURL, opts.Logger = codec, "https://sho.rt", slog.New(slog.DiscardHandler)
	svc, err := shorten.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// unknownCodeLimiter allows a client 5 unknown codes a minute.
func unknownCodeLimiter(t testing.TB) *ratelimit.PolicyLimiter {
	t.Helper()
	lim, err := ratelimit.NewPolicyLimiter(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}),
		ratelimit.Policy{Name: "u", Algorithm: ratelimit.TokenBucket, Limit: 5, Period: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func decodeLink(t *testing.T, resp *http.Response) linkResponse {
	t.Helper()
	var l linkResponse
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatalf("decode link: %v", err)
	}
	return l
}

func TestLinksLifecycle(t *testing.T) {
	t.Parallel()
	b, svc := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	other := b.addKey(t, auth.ScopeLinksWrite)

	resp := b.do(call{method: "POST", path: "/v1/links", key: key,
		body: `{"url":"https://example.com/page","expires_at":"2099-01-01T00:00:00Z","slug":"spring"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/links = %d: %+v", resp.StatusCode, decodeProblem(t, resp))
	}
	l := decodeLink(t, resp)
	if l.Code != "spring" || l.ShortURL != "https://sho.rt/spring" || l.URL != "https://example.com/page" ||
		l.ExpiresAt == nil || l.CreatedAt.IsZero() || resp.Header.Get("Location") != "/v1/links/spring" {
		t.Errorf("created %+v, Location %q", l, resp.Header.Get("Location"))
	}

	for _, ua := range []string{browser, "Slackbot-LinkExpanding 1.0"} {
		r := b.do(call{method: "GET", path: "/spring", userAgent: ua})
		if r.StatusCode != http.StatusFound || r.Header.Get("Location") != "https://example.com/page" ||
			r.Header.Get("Cache-Control") != "private, no-store" {
			t.Errorf("GET /spring = %d, Location %q, Cache-Control %q", r.StatusCode, r.Header.Get("Location"), r.Header.Get("Cache-Control"))
		}
	}
	if r := b.do(call{method: "HEAD", path: "/spring", userAgent: browser}); r.StatusCode != http.StatusFound || r.Header.Get("Location") == "" {
		t.Errorf("HEAD /spring = %d", r.StatusCode)
	}
	if err := svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := decodeLink(t, b.do(call{method: "GET", path: "/v1/links/spring", key: key}))
	if got.Clicks != 1 || got.BotHits != 2 || got.FirstClickAt == nil {
		t.Errorf("GET /v1/links/spring = %+v, want 1 click, 2 bot hits and a first click time", got)
	}
	if r := b.do(call{method: "GET", path: "/v1/links/spring", key: other}); r.StatusCode != http.StatusNotFound {
		t.Errorf("another key's GET = %d, want 404", r.StatusCode)
	}

	var page struct {
		Items      []linkResponse `json:"items"`
		NextCursor string         `json:"next_cursor"`
	}
	if err := json.NewDecoder(b.do(call{method: "GET", path: "/v1/links?limit=10", key: key}).Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].Code != "spring" || page.NextCursor != "" {
		t.Errorf("GET /v1/links = %+v", page)
	}

	if r := b.do(call{method: "DELETE", path: "/v1/links/spring", key: key}); r.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE = %d", r.StatusCode)
	}
	if r := b.do(call{method: "GET", path: "/spring"}); r.StatusCode != http.StatusNotFound {
		t.Errorf("GET /spring after delete = %d, want 404", r.StatusCode)
	} else {
		decodeProblem(t, r)
	}
}

func TestLinksBadInput(t *testing.T) {
	t.Parallel()
	b, _ := setupLinks(t)
	key := b.addKey(t, auth.ScopeLinksWrite)
	reader := b.addKey(t, auth.ScopeNotifyRead)
	if r := b.do(call{method: "POST", path: "/v1/links", key: key, body: `{"url":"https://example.com","slug":"dup"}`}); r.StatusCode != 201 {
		t.Fatalf("create = %d", r.StatusCode)
	}
	tests := []struct {
		name   string
		c      call
		status int
		field  string
	}{
		{"malformed url", call{body: `{"url":"https://exa mple.com"}`}, 422, "url"},
		{"scheme", call{body: `{"url":"javascript:alert(1)"}`}, 422, "url"},
		{"private", call{body: `{"url":"http://10.0.0.1/"}`}, 422, "url"},
		{"own host", call{body: `{"url":"https://sho.rt/x"}`}, 422, "url"},
		{"reserved slug", call{body: `{"url":"https://example.com","slug":"healthz"}`}, 422, "slug"},
		{"taken slug", call{body: `{"url":"https://example.com","slug":"dup"}`}, 409, "slug"},
		{"past expiry", call{body: `{"url":"https://example.com","expires_at":"2001-01-01T00:00:00Z"}`}, 422, "expires_at"},
		{"bad expiry", call{body: `{"url":"https://example.com","expires_at":"tomorrow"}`}, 400, "expires_at"},
		{"unknown field", call{body: `{"url":"https://example.com","ttl":5}`}, 400, "ttl"},
		{"bad limit", call{method: "GET", path: "/v1/links?limit=0"}, 400, "limit"},
		{"bad cursor", call{method: "GET", path: "/v1/links?cursor=zz"}, 400, "cursor"},
		{"wrong scope", call{body: `{"url":"https://example.com"}`, key: reader}, 403, ""},
	}
	for _, tt := range tests {
		c := tt.c
		c.method = cmp.Or(c.method, "POST")
		c.path = cmp.Or(c.path, "/v1/links")
		c.key = cmp.Or(c.key, key)
		resp := b.do(c)
		if resp.StatusCode != tt.status {
			t.Errorf("%s: status = %d, want %d", tt.name, resp.StatusCode, tt.status)
			continue
		}
		p := decodeProblem(t, resp)
		if tt.field != "" && (len(p.Errors) == 0 || p.Errors[0].Field != tt.field) {
			t.Errorf("%s: errors = %+v, want the field %q named", tt.name, p.Errors, tt.field)
		}
	}
}

func TestRedirectUnknownCodesLimited(t *testing.T) {
	t.Parallel()
	b, _ := setupLinks(t)
	for i := range 5 {
		if r := b.do(call{method: "GET", path: "/nothing" + string(rune('a'+i)), remote: "203.0.113.5:1000"}); r.StatusCode != 404 {
			t.Fatalf("unknown code #%d = %d, want 404", i, r.StatusCode)
		}
	}
	r := b.do(call{method: "GET", path: "/nothingz", remote: "203.0.113.5:1000"})
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("6th unknown code = %d, Retry-After %q; want 429 with Retry-After", r.StatusCode, r.Header.Get("Retry-After"))
	}
	decodeProblem(t, r)
	if r := b.do(call{method: "GET", path: "/nothingz", remote: "203.0.113.6:1000"}); r.StatusCode != 404 {
		t.Errorf("another client = %d, want 404", r.StatusCode)
	}
}

const browser = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
