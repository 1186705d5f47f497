package httpapi

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/store"
)

// bundle is what a test gets from setup: a server on a real SQLite store.
type bundle struct {
	t   testing.TB
	srv *Server
	db  *store.DB
}

func setup(t testing.TB) *bundle {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{DataDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return &bundle{t: t, db: db, srv: New(Options{Logger: slog.New(slog.DiscardHandler), Keys: db, Checks: []Check{{Name: "database", Ping: db.Ping}}})}
}

// addKey stores a key with scopes and returns its secret.
func (b *bundle) addKey(t *testing.T, scopes ...auth.Scope) string {
	t.Helper()
	secret, key, err := auth.NewKey("test", scopes, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.db.CreateAPIKey(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	b.srv.auth.forget()
	return secret
}

type call struct {
	method, path, body string
	key                string
	remote             string
	host               string // Host header; default localhost (a loopback name)
	contentType        string
	userAgent          string
	header             http.Header // added to the request's
}

func (b *bundle) do(c call) *http.Response {
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req := httptest.NewRequest(c.method, c.path, body)
	req.RemoteAddr = "127.0.0.1:5555"
	if c.remote != "" {
		req.RemoteAddr = c.remote
	}
	req.Host = cmp.Or(c.host, "localhost")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	for k, vs := range c.header {
		req.Header[k] = append(req.Header[k], vs...)
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	} else if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return serve(b.t, b.srv, req)
}

func decodeProblem(t *testing.T, resp *http.Response) Problem {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	var p Problem
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatalf("decode problem: %v", err)
	}
	if p.Status != resp.StatusCode || p.Title == "" || !strings.HasPrefix(p.Type, ProblemBase) || p.RequestID == "" {
		t.Errorf("problem = %+v; want status %d, a title, a type under %s and a request id", p, resp.StatusCode, ProblemBase)
	}
	return p
}

func TestClientErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := b.addKey(t, auth.ScopeAdmin)
	reader := b.addKey(t, auth.ScopeNotifyRead)
	big := `{"name":"` + strings.Repeat("x", 1<<20) + `","scopes":["admin"]}`
	tests := []struct {
		name      string
		call      call
		status    int
		typeSlug  string
		wantField string
	}{
		{name: "malformed json", call: call{method: "POST", path: "/v1/keys", body: `{"name":`, key: admin}, status: 400, typeSlug: "invalid-request"},
		{name: "syntax error", call: call{method: "POST", path: "/v1/keys", body: `{name: "x"}`, key: admin}, status: 400, typeSlug: "invalid-request"},
		{name: "unknown field", call: call{method: "POST", path: "/v1/keys", body: `{"name":"a","scopes":["admin"],"bogus":1}`, key: admin}, status: 400, typeSlug: "invalid-request", wantField: "bogus"},
		{name: "wrong type", call: call{method: "POST", path: "/v1/keys", body: `{"name":5,"scopes":["admin"]}`, key: admin}, status: 400, typeSlug: "invalid-request", wantField: "name"},
		{name: "trailing data", call: call{method: "POST", path: "/v1/keys", body: `{"name":"a","scopes":["admin"]} {}`, key: admin}, status: 400, typeSlug: "invalid-request"},
		{name: "empty body", call: call{method: "POST", path: "/v1/keys", key: admin}, status: 400, typeSlug: "invalid-request"},
		{name: "not json media type", call: call{method: "POST", path: "/v1/keys", body: `<a/>`, key: admin, contentType: "application/xml"}, status: 415, typeSlug: "unsupported-media-type"},
		{name: "oversize body", call: call{method: "POST", path: "/v1/keys", body: big, key: admin}, status: 413, typeSlug: "payload-too-large"},
		{name: "validation", call: call{method: "POST", path: "/v1/keys", body: `{"name":"","scopes":["root"]}`, key: admin}, status: 422, typeSlug: "validation-error", wantField: "scopes"},
		{name: "unknown route", call: call{method: "GET", path: "/v1/nothing"}, status: 404, typeSlug: "not-found"},
		{name: "wrong method", call: call{method: "PATCH", path: "/v1/keys", key: admin}, status: 405, typeSlug: "method-not-allowed"},
		{name: "missing key", call: call{method: "GET", path: "/v1/keys"}, status: 401, typeSlug: "unauthorized"},
		{name: "wrong key", call: call{method: "GET", path: "/v1/keys", key: "sk_nope"}, status: 401, typeSlug: "unauthorized"},
		{name: "wrong scope", call: call{method: "GET", path: "/v1/keys", key: reader}, status: 403, typeSlug: "forbidden"},
		{name: "unknown key id", call: call{method: "DELETE", path: "/v1/keys/key_missing", key: admin}, status: 404, typeSlug: "not-found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := b.do(tt.call)
			if resp.StatusCode != tt.status {
				t.Fatalf("%s %s status = %d, want %d", tt.call.method, tt.call.path, resp.StatusCode, tt.status)
			}
			p := decodeProblem(t, resp)
			if !strings.HasSuffix(p.Type, "/"+tt.typeSlug) {
				t.Errorf("type = %q, want it to end in %s", p.Type, tt.typeSlug)
			}
			if tt.wantField != "" && !slices.ContainsFunc(p.Errors, func(f apperr.FieldError) bool {
				return f.Field == tt.wantField
			}) {
				t.Errorf("errors = %+v, want one naming %q", p.Errors, tt.wantField)
			}
			if tt.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if tt.status == 405 && resp.Header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

func TestLoopbackOnlyWithoutKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if resp := b.do(call{method: "GET", path: "/v1/keys"}); resp.StatusCode != 200 {
		t.Errorf("loopback without keys: status = %d, want 200", resp.StatusCode)
	}
	resp := b.do(call{method: "GET", path: "/v1/keys", remote: "203.0.113.7:4000"})
	if resp.StatusCode != 403 {
		t.Fatalf("remote without keys: status = %d, want 403", resp.StatusCode)
	}
	decodeProblem(t, resp)
	// Public routes stay public from anywhere.
	if resp := b.do(call{method: "GET", path: "/healthz", remote: "203.0.113.7:4000"}); resp.StatusCode != 200 {
		t.Errorf("remote /healthz: status = %d, want 200", resp.StatusCode)
	}
	// Once a key exists, loopback needs one too.
	b.addKey(t, auth.ScopeAdmin)
	if resp := b.do(call{method: "GET", path: "/v1/keys"}); resp.StatusCode != 401 {
		t.Errorf("loopback with keys configured, no key: status = %d, want 401", resp.StatusCode)
	}
}

func TestKeyLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resp := b.do(call{method: "POST", path: "/v1/keys", body: `{"name":"ci","scopes":["notify:send","links:write"]}`})
	if resp.StatusCode != 201 {
		t.Fatalf("create: status = %d, want 201", resp.StatusCode)
	}
	var created keyResponse
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Key, "sk_") || created.ID == "" {
		t.Fatalf("created = %+v, want a secret and an id", created)
	}
	admin := b.addKey(t, auth.ScopeAdmin)
	// The new key authenticates but lacks admin.
	if resp := b.do(call{method: "GET", path: "/v1/keys", key: created.Key}); resp.StatusCode != 403 {
		t.Errorf("non-admin list: status = %d, want 403", resp.StatusCode)
	}
	resp = b.do(call{method: "GET", path: "/v1/keys", key: admin})
	var list struct{ Items []keyResponse }
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Items) != 2 {
		t.Fatalf("list = %+v, %v; want 2 keys", list, err)
	}
	for _, k := range list.Items {
		if k.Key != "" {
			t.Errorf("list shows a secret for %s", k.ID)
		}
	}
	if resp := b.do(call{method: "DELETE", path: "/v1/keys/" + created.ID, key: admin}); resp.StatusCode != 204 {
		t.Fatalf("revoke: status = %d, want 204", resp.StatusCode)
	}
	if resp := b.do(call{method: "GET", path: "/v1/keys", key: created.Key}); resp.StatusCode != 401 {
		t.Errorf("revoked key: status = %d, want 401", resp.StatusCode)
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := httptest.NewRequest("GET", "/healthz", nil)
	req.Header.Set("X-Request-Id", "abc-123")
	rec := record(t, b.srv, req)
	if got := rec.Header().Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("echoed request id = %q, want abc-123", got)
	}
	req.Header.Set("X-Request-Id", "bad id with spaces\n")
	rec = record(t, b.srv, req)
	if got := rec.Header().Get("X-Request-Id"); got == "" || strings.Contains(got, " ") {
		t.Errorf("request id = %q, want a generated one", got)
	}
}

func TestReadyzNamesFailingEngine(t *testing.T) {
	t.Parallel()
	down := func(context.Context) error { return io.ErrUnexpectedEOF }
	up := func(context.Context) error { return nil }
	srv := New(Options{Logger: slog.New(slog.DiscardHandler), Checks: []Check{{Name: "database", Ping: up}, {Name: "redis", Ping: down}}})
	rec := record(t, srv, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 {
		t.Fatalf("status = %d, want 503", rec.Code)
	}
	var p map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if d, _ := p["detail"].(string); !strings.Contains(d, "redis") || strings.Contains(d, "database") {
		t.Errorf("detail = %q, want only redis named", d)
	}
	if _, ok := p["checks"]; !ok {
		t.Error("problem lacks the checks extension")
	}
}

func TestPanicBecomesProblem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.Handle("GET /boom", public, func(http.ResponseWriter, *http.Request) error { panic("kaboom") })
	resp := b.do(call{method: "GET", path: "/boom"})
	if resp.StatusCode != 500 {
		t.Fatalf("status = %d, want 500", resp.StatusCode)
	}
	p := decodeProblem(t, resp)
	if strings.Contains(p.Detail, "kaboom") {
		t.Errorf("detail leaks the panic: %q", p.Detail)
	}
}

func TestMetricsCountRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.do(call{method: "GET", path: "/healthz"})
	b.do(call{method: "GET", path: "/no/where"}) // one segment would be a short code
	body, _ := io.ReadAll(b.do(call{method: "GET", path: "/metrics"}).Body)
	for _, want := range []string{
		`sluice_http_requests_total{code="200",method="GET",route="/healthz"} 1`,
		`sluice_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`sluice_http_request_duration_seconds_bucket{method="GET",route="/healthz"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
