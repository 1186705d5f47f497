package httpapi

import (
	"log/slog"
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
