package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// keylessDocs are the docs whose examples say they need no API key: they
// run on a node that has none (the README's tour makes the first). The
// others run on a node with an admin key in $SLUICE_API_KEY.
var keylessDocs = []string{"README.md", "notifications.md", "ratelimit.md"}

// TestDocExamples runs the shell examples of README.md and docs/*.md as a
// reader would, each file's in order on a fresh `sluice serve` of its own
// (the files in parallel), and checks each answer the doc shows. The
// convention a doc follows is written at the top of
// docexamples_parse_test.go; a doc that breaks it, or whose example
// answers otherwise than it says, fails the test.
func TestDocExamples(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed; the docs' examples use it", tool)
			}
			t.Skipf("%s is not installed; the docs' examples use it", tool)
		}
	}
	files, err := filepath.Glob("../../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../../README.md"}, files...)
	total := 0
	for _, path := range files {
		d, err := parseDoc(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range d.problems {
			t.Error(p)
		}
		t.Logf("%s: %d examples run, %d blocks not run", filepath.Base(path), len(d.steps), len(d.norun))
		total += len(d.steps)
		if len(d.steps) == 0 {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			runDoc(t, d)
		})
	}
	if total < 150 {
		t.Fatalf("found %d examples in README.md and docs/*.md; the parser looks wrong", total)
	}
}

// docRun is the state of one doc's run: its node (started for the first
// step that needs one), the commands' environment and the string fields
// of the answers so far.
type docRun struct {
	dir      string
	keyless  bool
	child    *child
	env      map[string]string
	vars     map[string]string
	replacer *strings.Replacer
}

// runDoc runs d's steps in a directory of their own.
func runDoc(t *testing.T, d *docFile) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(sluiceBinary(t), filepath.Join(bin, "sluice")); err != nil {
		t.Fatal(err)
	}
	for _, s := range d.steps {
		for _, tool := range []struct{ name, module string }{{"grpcurl", grpcurlModule}, {"grpc-health-probe", healthProbeModule}} {
			if strings.Contains(s.cmd, tool.name+" ") {
				if err := os.Symlink(goTool(t, tool.name, tool.module), filepath.Join(bin, tool.name)); err != nil && !errors.Is(err, os.ErrExist) {
					t.Fatal(err)
				}
			}
		}
	}
	r := &docRun{dir: dir, keyless: slices.Contains(keylessDocs, filepath.Base(d.path)),
		vars:     map[string]string{},
		env:      map[string]string{"PATH": bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME": dir},
		replacer: strings.NewReplacer(),
	}
	for _, s := range d.steps {
		r.step(t, d, s)
	}
}

// up starts the doc's node: on ./sluice-data, as the docs say, and on a
// port of its own, which the links' short URLs name (they are built from
// --http-addr); with an admin key unless the doc needs none.
func (r *docRun) up(t *testing.T) {
	t.Helper()
	if r.child != nil {
		return
	}
	// The port must be known before the node starts, so it is picked free
	// and may be taken by another test in between: try another one then.
	for attempt := 1; r.child == nil; attempt++ {
		c, err := tryStartChild(t, sluiceBinary(t), filepath.Join(r.dir, "sluice-data"), "--http-addr", enginetest.SpareAddr(t))
		switch {
		case err == nil:
			r.child = c
		case attempt == 3 || !strings.Contains(err.Error(), "address already in use"):
			t.Fatal(err)
		}
	}
	host := strings.TrimPrefix(r.child.httpURL, "http://")
	r.replacer = strings.NewReplacer("localhost:8080", host, "127.0.0.1:8080", host, "127.0.0.1:8081", r.child.grpcAddr)
	r.env["SLUICE_SERVER"] = r.child.httpURL
	if !r.keyless {
		key := r.child.adminKey(t)
		r.env["SLUICE_API_KEY"], r.env["K"] = key, "Authorization: Bearer "+key
	}
}

// step runs one command and checks its answer, asking a read again until
// the answer holds or a few seconds have passed.
func (r *docRun) step(t *testing.T, d *docFile, s docStep) {
	t.Helper()
	where := fmt.Sprintf("%s:%d", filepath.Base(d.path), s.line)
	cmd := strings.TrimSpace(strings.Replace(s.cmd, "go run ./cmd/sluice ", "sluice ", 1))
	cmd = strings.TrimSpace(strings.Replace(cmd, "bin/sluice ", "sluice ", 1))
	if cmd == "make build" {
		return // the test's binary is built already
	}
	if cmd == "sluice serve &" {
		r.up(t) // the node under test
		return
	}
	word, rest, _ := strings.Cut(cmd, " ")
	switch {
	case word == "printf" || word == "export":
	case word == "sluice" && (rest == "version" || strings.HasPrefix(rest, "help")):
	case word == "sluice" && strings.HasPrefix(rest, "serve"):
		if m := answerExit.FindStringSubmatch(s.answer); m == nil || m[1] == "0" {
			t.Fatalf("%s: %q starts another node: mark its block ```sh norun: why", where, s.cmd)
		}
	case word == "sluice", word == "curl", word == "grpcurl", word == "grpc-health-probe":
		r.up(t)
	default:
		t.Fatalf("%s: %q is neither curl, sluice, printf nor a gRPC tool; teach this test to run it", where, s.cmd)
	}
	var missing []string
	cmd = placeholder.ReplaceAllStringFunc(cmd, func(p string) string {
		name := strings.Trim(p, "<>")
		v, ok := r.vars[name]
		if !ok && htmlTags[name] {
			return p // markup in an HTML template, not a placeholder
		}
		if !ok {
			missing = append(missing, p)
		}
		return v
	})
	if len(missing) > 0 {
		t.Fatalf("%s: %q: no earlier answer gave %v", where, s.cmd, missing)
	}
	cmd = r.replacer.Replace(cmd)
	s.answer = r.replacer.Replace(s.answer)
	if word == "export" {
		r.export(t, where, strings.TrimPrefix(cmd, "export "))
		return
	}
	var got result
	var bad []string
	within := time.Duration(0)
	if isRead(cmd) {
		within = 10 * time.Second
	}
	_, _ = enginetest.Poll(within, func() error {
		got = r.run(t, where, cmd)
		bad = mismatches(s, got)
		if got.status == 401 || got.status >= 500 {
			bad = append(bad, fmt.Sprintf("answered %d", got.status))
		}
		return enginetest.State(len(bad) == 0, "%v", bad)
	})
	if len(bad) > 0 {
		t.Errorf("%s: %s\n  %s\nit printed: %s\n%s", where, s.cmd, strings.Join(bad, "\n  "), got.out, got.stderr)
	}
	for k, v := range answerVars(got.body()) {
		r.vars[k] = v
	}
	for k, v := range locationVars(got.out) {
		r.vars[k] = v
	}
}

var (
	// streamFlag is curl's -N, for an event stream, which does not end.
	streamFlag = regexp.MustCompile(`^curl (-\w*N\w*|.* -\w*N\w*) `)
	// writeFlag is a curl flag that makes a request other than a GET.
	writeFlag = regexp.MustCompile(`\s(-X|-d|--data|-F|--json|-I)`)
)

// streams reports whether cmd reads an event stream (curl -N).
func streams(cmd string) bool { return streamFlag.MatchString(cmd) }

// placeholder is a value the doc leaves to the reader, such as
// <notification_id>, taken from an earlier answer's field.
var placeholder = regexp.MustCompile(`<(\w+)>`)

// htmlTags are the elements an example's HTML template may open bare
// (<p>): a placeholder by that name that no answer gave is left as it is.
var htmlTags = map[string]bool{"p": true, "b": true, "i": true, "em": true, "strong": true, "br": true,
	"div": true, "span": true, "ul": true, "ol": true, "li": true, "h1": true, "h2": true, "table": true, "tr": true, "td": true}

// isRead reports whether cmd only reads, so that asking again changes
// nothing: a curl GET of the API (not a redirect, which counts a click),
// or a sluice command that gets or lists.
func isRead(cmd string) bool {
	f := strings.Fields(cmd)
	switch f[0] {
	case "curl":
		return strings.Contains(cmd, "/v1/") && !writeFlag.MatchString(cmd) && !streams(cmd)
	case "sluice":
		return len(f) > 2 && (f[2] == "get" || f[2] == "list" || f[2] == "stats")
	}
	return false
}

// export sets a variable for the later commands: `export NAME=sk_...`
// takes the longest value of the answers so far that starts with the part
// before "..." (the key, not its displayed prefix).
func (r *docRun) export(t *testing.T, where, assign string) {
	t.Helper()
	name, value, _ := strings.Cut(assign, "=")
	if prefix, _, ok := strings.Cut(value, "..."); ok {
		value = ""
		for _, v := range r.vars {
			if strings.HasPrefix(v, prefix) && len(v) > len(value) {
				value = v
			}
		}
		if value == "" {
			t.Fatalf("%s: export %s: no earlier answer gave a value starting %q", where, name, prefix)
		}
	}
	r.env[name] = value
	if name == "SLUICE_API_KEY" {
		r.env["K"] = "Authorization: Bearer " + value
	}
}

// run runs cmd in bash in the doc's directory, curl reporting each status
// on stderr so that pipes (| head) see only the body.
func (r *docRun) run(t *testing.T, where, cmd string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	maxTime := "10"
	if streams(cmd) {
		maxTime = "2" // an event stream: its first events, then curl gives up (exit 28)
	}
	script := `curl() { command curl --max-time ` + maxTime + ` -w '%{stderr}\n@status %{http_code}\n' "$@"; }` + "\n" + cmd
	c := exec.CommandContext(ctx, "bash", "-c", script)
	c.Dir = r.dir
	for k, v := range r.env {
		c.Env = append(c.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	var exit *exec.ExitError
	res := result{out: stdout.String()}
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 28 && streams(cmd):
	case errors.As(err, &exit):
		res.exit = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s: %q: %v", where, cmd, err)
	}
	var errOut []string
	for line := range strings.SplitSeq(stderr.String(), "\n") {
		if code, ok := strings.CutPrefix(line, "@status "); ok {
			res.status, _ = strconv.Atoi(code)
		} else if strings.TrimSpace(line) != "" {
			errOut = append(errOut, line)
		}
	}
	res.stderr = strings.Join(errOut, "\n")
	return res
}
