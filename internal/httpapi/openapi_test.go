package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes keeps openapi.json and the registered routes in
// step: every route is documented and every documented operation is served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(documented)
	srv := New(Options{Logger: slog.New(slog.DiscardHandler)})
	// OpenAPI path templates have no multi-segment wildcard: a ServeMux
	// "{path...}" is documented as "{path}", with a note that it may hold
	// slashes.
	var registered []string
	for _, r := range srv.Routes() {
		registered = append(registered, strings.ReplaceAll(strings.ReplaceAll(r, "...}", "}"), "{$}", "")) // "/{$}" is "/"
	}
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %q is served but not in openapi.json", r)
		}
	}
	for _, d := range documented {
		// A GET pattern serves HEAD too (and a separate HEAD pattern
		// would conflict with fixed GET routes), so a documented HEAD is
		// served when its GET is.
		if path, ok := strings.CutPrefix(d, "HEAD "); ok && slices.Contains(registered, "GET "+path) {
			continue
		}
		if !slices.Contains(registered, d) {
			t.Errorf("openapi.json documents %q, which is not served", d)
		}
	}
}

// TestOpenAPIServerIsWhereItWasFetched checks servers[0].url: the
// configured public URL, else the scheme and Host of the request, else the
// listener's address.
func TestOpenAPIServerIsWhereItWasFetched(t *testing.T) {
	t.Parallel()
	server := func(srv *Server, req *http.Request) string {
		t.Helper()
		rec := record(t, srv, req)
		var doc struct{ Servers []struct{ URL string } }
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || len(doc.Servers) != 1 {
			t.Fatalf("servers of %s: %v %+v", rec.Body, err, doc.Servers)
		}
		return doc.Servers[0].URL
	}
	plain := New(Options{Logger: slog.New(slog.DiscardHandler)})
	req := httptest.NewRequest("GET", "http://10.1.2.3:9090/openapi.json", nil)
	if got := server(plain, req); got != "http://10.1.2.3:9090" {
		t.Errorf("by Host: %q, want http://10.1.2.3:9090", got)
	}
	req = httptest.NewRequest("GET", "https://api.example.com/openapi.json", nil)
	if got := server(plain, req); got != "https://api.example.com" {
		t.Errorf("over TLS: %q, want https://api.example.com", got)
	}
	req = httptest.NewRequest("GET", "/openapi.json", nil)
	req.Host = ""
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 18080}
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, addr))
	if got := server(plain, req); got != "http://127.0.0.1:18080" {
		t.Errorf("no Host: %q, want the listener's http://127.0.0.1:18080", got)
	}
	req = httptest.NewRequest("GET", "/openapi.json", nil)
	req.Host = "evil\"host"
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, addr))
	if got := server(plain, req); got != "http://127.0.0.1:18080" {
		t.Errorf("a malformed Host: %q, want the listener's address", got)
	}
	public := New(Options{Logger: slog.New(slog.DiscardHandler), PublicURL: "https://sluice.example.com/"})
	if got := server(public, httptest.NewRequest("GET", "http://10.1.2.3:9090/openapi.json", nil)); got != "https://sluice.example.com" {
		t.Errorf("with a public URL: %q, want https://sluice.example.com", got)
	}
	if bytes.Contains(OpenAPI("x"), []byte(serverSentinel)) {
		t.Error("the served document still holds the sentinel")
	}
}

// TestOpenAPISecurityMatchesRoutes checks each operation's security
// against the route's: a route that needs an API key scope takes a key
// or a dashboard session and documents 401 and 403; a public route
// requires no key (its own credential, a preference token, aside).
func TestOpenAPISecurityMatchesRoutes(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	type operation struct {
		Security  []map[string][]string `json:"security"`
		Responses map[string]any        `json:"responses"`
	}
	srv := New(Options{Logger: slog.New(slog.DiscardHandler)})
	for _, rt := range srv.routes {
		pattern, scope := rt.pattern, rt.scope
		method, path, _ := strings.Cut(pattern, " ")
		raw, ok := doc.Paths[strings.ReplaceAll(path, "...}", "}")][strings.ToLower(method)]
		if !ok {
			continue // TestOpenAPIMatchesRoutes reports it
		}
		var op operation
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		var schemes []string
		optional := false
		for _, alt := range op.Security {
			if len(alt) == 0 {
				optional = true
			}
			for name := range alt {
				schemes = append(schemes, name)
			}
		}
		slices.Sort(schemes)
		if scope != public {
			if !slices.Equal(schemes, []string{"bearer", "session"}) || optional {
				t.Errorf("%s needs scope %s: security = %v, want bearer or session, required", pattern, scope, op.Security)
			}
			for _, st := range []string{"401", "403"} {
				if op.Responses[st] == nil {
					t.Errorf("%s needs scope %s but does not document %s", pattern, scope, st)
				}
			}
			continue
		}
		if pattern == "GET /metrics" && optional { // a key or session only with --metrics-auth
			continue
		}
		if slices.Contains(schemes, "bearer") || (slices.Contains(schemes, "session") && !optional) {
			t.Errorf("%s is public but its security is %v", pattern, op.Security)
		}
	}
}
