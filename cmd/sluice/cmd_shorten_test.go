package main

import (
	"context"
	"net/http"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/enginetest"
)

// TestShortenEndToEnd shortens through the CLI, follows the link on a
// running node and sees the click counted once the flusher has run.
func TestShortenEndToEnd(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Links.FlushInterval = 50 * time.Millisecond
	n := startNode(t, cfg)
	env := map[string]string{"SLUICE_SERVER": n.httpURL}
	code, out, errs := runCLI(t, env, "shorten", "https://example.com/launch", "--slug", "launch", "-v")
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), "/launch") || !strings.Contains(errs, "-> https://example.com/launch") {
		t.Fatalf("shorten = %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, env, "shorten", "https://example.com/x", "--slug", "launch"); code != 1 || !strings.Contains(errs, "409") || !strings.Contains(errs, "slug") {
		t.Errorf("taken slug = %d %q, want 409 naming the slug", code, errs)
	}
	if code, _, errs := runCLI(t, env, "shorten", "ftp://example.com/x"); code != 1 || !strings.Contains(errs, "url") {
		t.Errorf("ftp target = %d %q, want the url refused", code, errs)
	}
	if code, _, _ := runCLI(t, env, "shorten"); code != exitError {
		t.Errorf("shorten without a URL = %d, want 2, a usage error", code)
	}
	_, generated, _ := runCLI(t, env, "shorten", "https://example.com/gen")
	if c := path.Base(strings.TrimSpace(generated)); len(c) != 7 {
		t.Errorf("generated code %q, want 7 characters", c)
	}

	req, _ := http.NewRequest("GET", n.httpURL+"/launch", nil)
	req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0")
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://example.com/launch" {
		t.Fatalf("GET /launch = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	c := client.New(n.httpURL, "")
	enginetest.EventuallyNil(t, 10*time.Second, "the click is counted", func() error {
		l, err := c.Link(context.Background(), "launch")
		return enginetest.State(err == nil && l.Clicks == 1 && l.FirstClickAt != nil, "%s", "link: "+l.Code)
	})
	page, err := c.Links(context.Background(), 1, "")
	if err != nil || len(page.Items) != 1 || page.NextCursor == "" {
		t.Errorf("Links(limit 1) = %+v, %v; want one item and a next cursor", page, err)
	}
	if err := c.DeleteLink(context.Background(), "launch"); err != nil {
		t.Fatalf("DeleteLink: %v", err)
	}
	if _, err := c.Link(context.Background(), "launch"); !client.IsStatus(err, 404) {
		t.Errorf("Link after delete = %v, want 404", err)
	}
}
