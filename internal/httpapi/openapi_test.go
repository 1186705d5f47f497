package httpapi

import (
	"encoding/json"
	"log/slog"
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
		registered = append(registered, strings.ReplaceAll(r, "...}", "}"))
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
