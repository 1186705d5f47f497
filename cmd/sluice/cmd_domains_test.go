package main

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/client"
)

// TestDomainsCLI registers a domain, shortens on it, lists and deletes it
// through the CLI against a running node.
func TestDomainsCLI(t *testing.T) {
	t.Parallel()
	n, env := startCLINode(t)
	code, out, errs := runCLI(t, env, "domains", "add", "Go.Example.com", "--fallback-url", "https://example.com/home", "--json")
	var d client.Domain
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.Domain != "go.example.com" || d.FallbackURL != "https://example.com/home" {
		t.Fatalf("domains add = %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI(t, env, "domains", "add", "go.example.com:80"); code != exitRefused || !strings.Contains(errs, "domain") {
		t.Errorf("domains add with a port = %d %q, want refused naming the domain", code, errs)
	}
	code, out, errs = runCLI(t, env, "shorten", "https://example.com/go", "--slug", "launch", "--domain", "go.example.com")
	if code != 0 || strings.TrimSpace(out) != "http://go.example.com/launch" {
		t.Fatalf("shorten --domain = %d %q %q", code, out, errs)
	}
	if code, out, _ := runCLI(t, env, "links", "get", "launch", "--domain", "go.example.com", "--json"); code != 0 || !strings.Contains(out, `"url": "https://example.com/go"`) {
		t.Errorf("links get --domain = %d %q", code, out)
	}
	if code, out, _ := runCLI(t, env, "links", "stats", "launch", "--domain", "go.example.com", "--json"); code != 0 || !strings.Contains(out, `"code": "launch"`) {
		t.Errorf("links stats --domain = %d %q", code, out)
	}
	if code, _, errs := runCLI(t, env, "links", "stats", "launch"); code != exitRefused || !strings.Contains(errs, "404") {
		t.Errorf("links stats without --domain = %d %q, want 404 (no such link without a domain)", code, errs)
	}
	req, _ := http.NewRequest("GET", n.httpURL+"/launch", nil)
	req.Host = "go.example.com"
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://example.com/go" {
		t.Errorf("GET /launch on go.example.com = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, _, errs := runCLI(t, env, "domains", "update", "go.example.com"); code == 0 || !strings.Contains(errs, "--fallback-url") {
		t.Errorf("domains update without --fallback-url = %d %q, want refused naming the flag", code, errs)
	}
	code, out, errs = runCLI(t, env, "domains", "update", "go.example.com", "--fallback-url", "https://example.com/sale", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.FallbackURL != "https://example.com/sale" {
		t.Errorf("domains update = %d %q %q", code, out, errs)
	}
	req, _ = http.NewRequest("GET", n.httpURL+"/nothing", nil)
	req.Host = "go.example.com"
	if resp, err = noFollow.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://example.com/sale" {
		t.Errorf("GET /nothing on go.example.com after domains update = %d %q, want 302 to the new fallback", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, out, _ := runCLI(t, env, "domains", "list", "--json"); code != 0 || !strings.Contains(out, `"domain": "go.example.com"`) {
		t.Errorf("domains list --json = %d %q", code, out)
	}
	if code, out, _ := runCLI(t, env, "domains", "list"); code != 0 || !regexp.MustCompile(`(?m)^go\.example\.com\s+\S+\s+\S+\s+https://example\.com/sale`).MatchString(out) {
		t.Errorf("domains list = %d %q, want a table row of go.example.com", code, out)
	}
	if code, _, errs := runCLI(t, env, "domains", "delete", "go.example.com"); code != exitRefused || !strings.Contains(errs, "409") {
		t.Errorf("domains delete with a link = %d %q, want 409", code, errs)
	}
	if err := client.New(n.httpURL, "").DeleteDomainLink(context.Background(), "go.example.com", "launch"); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, env, "domains", "delete", "go.example.com"); code != 0 {
		t.Errorf("domains delete = %d %q", code, errs)
	}
	if code, out, _ := runCLI(t, env, "domains", "list", "--json"); code != 0 || !strings.Contains(out, `"items": []`) {
		t.Errorf("domains list --json after delete = %d %q, want no items", code, out)
	}
}
