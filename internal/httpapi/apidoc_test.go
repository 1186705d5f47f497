package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// TestAPIGuideListsEveryRoute keeps docs/api.md's endpoint table in step
// with the routes: each served route must appear there as `METHOD /path`,
// with its curl example or a link to the guide that has one.
func TestAPIGuideListsEveryRoute(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Options{Logger: slog.New(slog.DiscardHandler)})
	for _, r := range srv.Routes() {
		if !strings.Contains(string(doc), "`"+r+"`") {
			t.Errorf("route %q is served but not listed in docs/api.md's endpoint table", r)
		}
	}
}

var update = flag.Bool("update", false, "rewrite docs/openapi.json from the served document (go generate ./internal/httpapi)")

// publishedServer is the server docs/openapi.json names: the default
// --http-addr. The served document names the URL it was fetched from.
const publishedServer = "http://127.0.0.1:8080"

// TestPublishedOpenAPI keeps docs/openapi.json what GET /openapi.json
// serves, servers aside (the served one names where it was fetched).
func TestPublishedOpenAPI(t *testing.T) {
	t.Parallel()
	const path = "../../docs/openapi.json"
	want := OpenAPI(publishedServer)
	if *update {
		if err := os.WriteFile(path, append(want, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with go generate ./internal/httpapi)", err)
	}
	rec := record(t, New(Options{Logger: slog.New(slog.DiscardHandler)}), httptest.NewRequest("GET", "http://sluice.example:9999/openapi.json", nil))
	normalized := func(doc []byte) string {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatal(err)
		}
		m["servers"] = nil
		out, _ := json.MarshalIndent(m, "", "  ")
		return string(out)
	}
	if normalized(got) != normalized(rec.Body.Bytes()) {
		t.Errorf("%s differs from GET /openapi.json: run go generate ./internal/httpapi", path)
	}
	if !bytes.Equal(bytes.TrimSpace(got), want) {
		t.Errorf("%s is not as generated (servers %s): run go generate ./internal/httpapi", path, publishedServer)
	}
}
