package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseDocReadsTheConvention parses a doc written to the convention
// of docexamples_parse_test.go, and one that breaks it.
func TestParseDocReadsTheConvention(t *testing.T) {
	t.Parallel()
	doc := "# A guide\n\n" +
		"```sh\n" +
		"# a heading, not an answer\n" +
		"curl -s localhost:8080/healthz   # 200 {\"status\":\"ok\"}\n" +
		"curl -s localhost:8080/v1/keys -d '{\n  \"name\": \"me\"\n}'\n" +
		"#   201 {\"name\":\"me\",\n" +
		"#        \"key\":\"sk_...\"}\n" +
		"curl -si localhost:8080/spring \\\n  -A x\n" +
		"```\n" +
		"```http\nHTTP/1.1 302 Found\nLocation: https://example.com/\n```\n\n" +
		"Prose.\n\n" +
		"```json\n{\"not\":\"an answer\"}\n```\n\n" +
		"```sh norun: needs an SMTP relay\nsluice serve --smtp-addr smtp.example.com:587\n```\n\n" +
		"| route | example |\n| --- | --- |\n" +
		"| `GET /metrics` | `curl -s localhost:8080/metrics \\| head` → `200` |\n"
	bad := "```sh norun\nx\n```\n\n```bash\ncurl x\n```\n\n" +
		"```sh\ncurl -s localhost:8080/healthz\n# {\"status\":\"ok\"}\n```\n\n" +
		"Text:\n\n    curl -s localhost:8080/healthz\n"
	dir := t.TempDir()
	good, err := parseDoc(writeDoc(t, dir, "good.md", doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []docStep{
		{line: 5, cmd: "curl -s localhost:8080/healthz", answer: `200 {"status":"ok"}`},
		{line: 6, cmd: "curl -s localhost:8080/v1/keys -d '{\n  \"name\": \"me\"\n}'", answer: `201 {"name":"me", "key":"sk_..."}`},
		{line: 11, cmd: "curl -si localhost:8080/spring    -A x", answer: "HTTP/1.1 302 Found\nLocation: https://example.com/", http: true},
		{line: 31, cmd: "curl -s localhost:8080/metrics | head", answer: "200"},
	}
	if !slices.Equal(good.steps, want) {
		t.Errorf("steps:\n%#v\nwant:\n%#v", good.steps, want)
	}
	if len(good.problems) != 0 || good.norun[25] != "needs an SMTP relay" {
		t.Errorf("problems %q, norun %v; want none and the SMTP block's reason", good.problems, good.norun)
	}
	broken, err := parseDoc(writeDoc(t, dir, "bad.md", bad))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"bad.md:1: ```sh norun needs its reason", "bad.md:5: ```bash", "bad.md:11: an answer on a comment line of one space", "bad.md:16: a command in an indented block"} {
		if !strings.Contains(strings.Join(broken.problems, "\n"), want) {
			t.Errorf("problems %q; want one starting %q", broken.problems, want)
		}
	}
}

func writeDoc(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMismatchesCatchDrift checks that an answer differing from what a doc
// shows is reported, and that what the doc elides is not.
func TestMismatchesCatchDrift(t *testing.T) {
	t.Parallel()
	const body = `{"id":"ntf_01a2b3","status":"accepted","count":3,"at":"2026-12-01T10:00:00.5Z","items":[{"read":true}]}`
	tests := []struct {
		name   string
		step   docStep
		got    result
		errors int
	}{
		{"as shown", docStep{answer: `202 {"id":"ntf_...","status":"accepted","count":3,"at":"2026-11-30T00:00:00Z","items":[...]}`}, result{status: 202, out: body}, 0},
		{"nested field", docStep{answer: `{"read":true}`}, result{status: 200, out: body}, 0},
		{"elided number", docStep{answer: `{"count":2...}`}, result{status: 200, out: body}, 0},
		{"other status", docStep{answer: `201 {"status":"accepted"}`}, result{status: 202, out: body}, 1},
		{"other value", docStep{answer: `{"status":"queued","count":4}`}, result{status: 202, out: body}, 2},
		{"missing field", docStep{answer: `{"outcome":"..."}`}, result{status: 200, out: body}, 1},
		{"refusal not shown", docStep{answer: `the notification`}, result{status: 404, out: `{}`}, 1},
		{"refusal shown", docStep{answer: `404: no such notification`}, result{status: 404, out: `{}`}, 0},
		{"not JSON", docStep{answer: `{"status":"ok"}`}, result{status: 200, out: "ok"}, 1},
		{"exit code", docStep{answer: `exit 2, and on stderr: ...`}, result{exit: 1}, 1},
		{"failed command", docStep{}, result{exit: 1}, 1},
		{"headers", docStep{http: true, answer: "HTTP/1.1 302 Found\nLocation: https://example.com/a\nCache-Control: private, no-store"},
			result{status: 302, out: "HTTP/1.1 302 Found\r\nLocation: https://example.com/b\r\n\r\n"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := mismatches(tt.step, tt.got); len(got) != tt.errors {
				t.Errorf("mismatches(%q, %+v) = %q, want %d", tt.step.answer, tt.got, got, tt.errors)
			}
		})
	}
}
