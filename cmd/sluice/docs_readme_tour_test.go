package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tourStep is one command line of the README's shell examples with the
// answer its comments show: inline (`curl ... # 200 {...}`) or on the
// indented comment lines below it (`#   202 {...}`).
type tourStep struct {
	line, answer string
}

// readmeTour returns the command lines of the fenced sh blocks between
// the README's "## Quick start" and the next top-level section (the quick
// start and "A minute with each part"), continued lines joined.
func readmeTour(t *testing.T) []tourStep {
	t.Helper()
	doc, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(doc), "\n## Quick start\n")
	if !ok {
		t.Fatal(`README.md has no "## Quick start" section`)
	}
	text, _, _ = strings.Cut(text, "\n## ")
	text = strings.ReplaceAll(text, "\\\n", " ")
	var steps []tourStep
	inBlock := false
	for line := range strings.SplitSeq(text, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inBlock = line == "```sh"
		case !inBlock || strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "#"):
			// "#   200 {...}" continues the answer of the line above;
			// "# Rate limiting: ..." is a heading of its own.
			if strings.HasPrefix(line, "#  ") && len(steps) > 0 {
				steps[len(steps)-1].answer += " " + strings.TrimSpace(line[1:])
			}
		default:
			cmd, comment, _ := strings.Cut(line, " # ")
			steps = append(steps, tourStep{line: strings.TrimSpace(cmd), answer: strings.TrimSpace(comment)})
		}
	}
	return steps
}

var (
	// answerStatus is the status an answer comment opens with.
	answerStatus = regexp.MustCompile(`^(\d{3})\b`)
	// answerField is one "name":value pair an answer comment shows; a
	// value with "..." in it, or a list or object, is only required to
	// be there.
	answerField = regexp.MustCompile(`"(\w+)":\s*("(?:[^"\\]|\\.)*"|true|false|null|-?\d+(?:\.\d+)?|\.\.\.|\[|\{)`)
	// placeholder is a value the README leaves to the reader, such as
	// <notification_id>, taken from an earlier answer's field.
	placeholder = regexp.MustCompile(`<(\w+)>`)
)

// TestReadmeTour follows the README's quick start and "A minute with
// each part" in order, as a newcomer would, on a fresh node: every curl
// line runs in bash against the node (the API key exported from the
// key-creation answer, as the README says), every `go run ./cmd/sluice`
// line runs as this binary's CLI. No step may answer 401 or fail, and
// each answer the comments show holds: its status and its fields.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	cfg := testConfig(t)
	n := startNode(t, cfg)
	host := strings.TrimPrefix(n.httpURL, "http://")
	env := map[string]string{"SLUICE_SERVER": n.httpURL, "SLUICE_DATA_DIR": cfg.DataDir}
	vars := map[string]string{} // string fields of the answers so far
	steps := readmeTour(t)
	ran := 0
	for _, s := range steps {
		line := placeholder.ReplaceAllStringFunc(s.line, func(p string) string {
			v, ok := vars[strings.Trim(p, "<>")]
			if !ok {
				t.Fatalf("%q: no earlier answer gave %s", s.line, p)
			}
			return v
		})
		line = strings.NewReplacer("localhost:8080", host, "127.0.0.1:8080", host).Replace(line)
		var status int
		var out string
		switch {
		case line == "go run ./cmd/sluice serve &": // the node under test
			continue
		case strings.HasPrefix(line, "export SLUICE_API_KEY="):
			if vars["key"] == "" {
				t.Fatalf("%q: no earlier answer carried a key", s.line)
			}
			env["SLUICE_API_KEY"] = vars["key"]
			continue
		case strings.HasPrefix(line, "go run ./cmd/sluice "):
			code, stdout, stderr := runCLI(t, env, strings.Fields(strings.TrimPrefix(line, "go run ./cmd/sluice "))...)
			if code != 0 {
				t.Fatalf("%q exited %d: %s", s.line, code, stderr)
			}
			out = stdout
		case strings.HasPrefix(line, "curl "):
			status, out = tourCurl(t, env, line)
			if status == 401 || status >= 500 || (status >= 400 && s.answer == "") {
				t.Fatalf("%q answered %d: %s", s.line, status, out)
			}
		default:
			t.Fatalf("README tour line %q is neither curl nor go run ./cmd/sluice; teach this test to run it", s.line)
		}
		ran++
		checkAnswer(t, s, status, out)
		var fields map[string]any
		if json.Unmarshal([]byte(tourBody(out)), &fields) == nil {
			for k, v := range fields {
				if str, ok := v.(string); ok {
					vars[k] = str
				}
			}
		}
	}
	if ran < 15 {
		t.Fatalf("ran %d of the README's tour lines; the section markers look wrong", ran)
	}
}

// tourCurl runs one curl line in bash with env, curl reporting the
// status on stderr so that pipes (| head) see only the body.
func tourCurl(t *testing.T, env map[string]string, line string) (status int, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := `curl() { command curl --max-time 10 -w '%{stderr}%{http_code}\n' "$@"; }` + "\n" + line
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%q: %v: %s", line, err, stderr.String())
	}
	status, err := strconv.Atoi(strings.TrimSpace(stderr.String()))
	if err != nil {
		t.Fatalf("%q: no status from curl (stderr %q)", line, stderr.String())
	}
	return status, stdout.String()
}

// tourBody is out without the headers `curl -si` prints before the body.
func tourBody(out string) string {
	if strings.HasPrefix(out, "HTTP/") {
		if _, body, ok := strings.Cut(out, "\r\n\r\n"); ok {
			return body
		}
	}
	return out
}

// checkAnswer checks the status and fields s's comment shows against
// what the step answered; fields may sit at any depth of the body (the
// "field" of each entry of "errors").
func checkAnswer(t *testing.T, s tourStep, status int, out string) {
	t.Helper()
	if m := answerStatus.FindStringSubmatch(s.answer); m != nil && status != 0 {
		if want, _ := strconv.Atoi(m[1]); status != want {
			t.Errorf("%q answered %d, the README says %d: %s", s.line, status, want, out)
		}
	}
	fields := answerField.FindAllStringSubmatch(s.answer, -1)
	if len(fields) == 0 {
		return
	}
	var body any
	if err := json.Unmarshal([]byte(tourBody(out)), &body); err != nil {
		t.Errorf("%q answered %q, not the JSON the README shows", s.line, out)
		return
	}
	for _, f := range fields {
		var want any
		presence := strings.Contains(f[2], "...") || f[2] == "[" || f[2] == "{"
		if !presence {
			_ = json.Unmarshal([]byte(f[2]), &want)
		}
		if !hasField(body, f[1], want, presence) {
			t.Errorf("%q: the README shows %s:%s; the answer was %s", s.line, f[1], f[2], out)
		}
	}
}

// hasField reports whether v holds, at any depth, an object with the
// field name set to want (or set at all, when presence).
func hasField(v any, name string, want any, presence bool) bool {
	switch v := v.(type) {
	case map[string]any:
		if got, ok := v[name]; ok && (presence || reflect.DeepEqual(got, want)) {
			return true
		}
		for _, e := range v {
			if hasField(e, name, want, presence) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasField(e, name, want, presence) {
				return true
			}
		}
	}
	return false
}
