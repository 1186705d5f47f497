package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/client"
)

// helpLines are the command lines of every command and subcommand, as
// `sluice help` names them.
func helpLines() [][]string {
	var lines [][]string
	for name, c := range commands {
		lines = append(lines, []string{name})
		for sub := range c.subs {
			lines = append(lines, []string{name, sub})
		}
	}
	sort.Slice(lines, func(i, j int) bool { return strings.Join(lines[i], " ") < strings.Join(lines[j], " ") })
	return lines
}

var flagLine = regexp.MustCompile(`^  (--?[a-z0-9-]+)( \S+)?$`)

// helpFlags returns the flags a help text lists, failing on a flag line
// out of the one format ("  --name type").
func helpFlags(t *testing.T, help string) []string {
	t.Helper()
	var flags []string
	for line := range strings.SplitSeq(help, "\n") {
		if !strings.HasPrefix(line, "  -") {
			continue
		}
		m := flagLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("flag line %q is not \"  --name type\"", line)
			continue
		}
		flags = append(flags, m[1])
	}
	return flags
}

// TestHelpOfEveryCommand: `sluice help CMD [SUB]` and `sluice CMD [SUB] -h`
// exit 0 and print the same help, on stdout, listing the command's own
// flags in one format; serve's settings show only in serve's help.
func TestHelpOfEveryCommand(t *testing.T) {
	t.Parallel()
	for _, line := range helpLines() {
		name := strings.Join(line, " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"SLUICE_DATA_DIR": t.TempDir()}
			code, help, errs := runCLI(t, env, append([]string{"help"}, line...)...)
			if code != exitOK || !strings.HasPrefix(help, "Usage: sluice "+name) {
				t.Fatalf("sluice help %s = %d, stdout %q, stderr %q; want 0 and its usage", name, code, help, errs)
			}
			code, dashH, errs := runCLI(t, env, append(slices.Clone(line), "-h")...)
			if code != exitOK || dashH != help || errs != "" {
				t.Errorf("sluice %s -h = %d, stdout %q, stderr %q; want 0 and what help printed", name, code, dashH, errs)
			}
			flags := helpFlags(t, help)
			if _, group := commands[name]; group && commands[name].subs != nil {
				for sub := range commands[name].subs {
					if !strings.Contains(help, "\n  "+sub) {
						t.Errorf("sluice help %s does not list %s", name, sub)
					}
				}
				if len(flags) > 0 {
					t.Errorf("sluice help %s lists flags %v, want its subcommands only", name, flags)
				}
				return
			}
			if name == "serve" {
				if len(flags) < 100 || !slices.Contains(flags, "--http-read-timeout") {
					t.Errorf("sluice help serve lists %d flags, want every setting", len(flags))
				}
				return
			}
			if len(flags) > 40 || slices.Contains(flags, "--http-read-timeout") || slices.Contains(flags, "--nats-replicas") {
				t.Errorf("sluice help %s lists %d flags %v, want its own only", name, len(flags), flags)
			}
		})
	}
	_, help, _ := runCLI(t, nil, "help", "keys", "create")
	if flags := helpFlags(t, help); !slices.Contains(flags, "--scope") || !slices.Contains(flags, "--name") || !strings.Contains(help, "--scope scope\n") {
		t.Errorf("sluice help keys create lists %v, want --scope scope and --name", flags)
	}
	if code, _, errs := runCLI(t, nil, "help", "frobnicate"); code != exitError || !strings.Contains(errs, "unknown command") {
		t.Errorf("sluice help frobnicate = %d %q, want 2 and unknown command", code, errs)
	}
}

// TestServerRule: every command that talks to a server finds it the same
// way: --server, else SLUICE_SERVER, else the local node's address, else
// the default.
func TestServerRule(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte("http_addr: 0.0.0.0:7777\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		flag string
		env  map[string]string
		want string
	}{
		{name: "nothing set", want: client.DefaultServer},
		{name: "flag wins", flag: "https://a.example", env: map[string]string{"SLUICE_SERVER": "https://b.example", "SLUICE_HTTP_ADDR": "127.0.0.1:1"}, want: "https://a.example"},
		{name: "SLUICE_SERVER over the local node", env: map[string]string{"SLUICE_SERVER": "https://b.example", "SLUICE_HTTP_ADDR": "127.0.0.1:1"}, want: "https://b.example"},
		{name: "the local node by SLUICE_HTTP_ADDR", env: map[string]string{"SLUICE_HTTP_ADDR": "[::]:9090"}, want: "http://[::1]:9090"},
		{name: "the local node by its config file", env: map[string]string{"SLUICE_CONFIG": file}, want: "http://127.0.0.1:7777"},
		{name: "SLUICE_HTTP_ADDR over the file", env: map[string]string{"SLUICE_CONFIG": file, "SLUICE_HTTP_ADDR": "127.0.0.1:6666"}, want: "http://127.0.0.1:6666"},
		{name: "a local node serving TLS", env: map[string]string{"SLUICE_HTTP_ADDR": "127.0.0.1:8443", "SLUICE_TLS_CERT_FILE": "/nonexistent.pem"}, want: "https://127.0.0.1:8443"},
	}
	for _, tt := range tests {
		env := &environment{getenv: func(k string) string { return tt.env[k] }}
		if got := serverURL(env, tt.flag); got != tt.want {
			t.Errorf("%s: serverURL = %q, want %q", tt.name, got, tt.want)
		}
	}

	// The same rule through the real commands, against a node and a
	// closed port: reaching the node is a refusal (1) or, for the health
	// check, success (0); the closed port a connection error.
	n := startNode(t, testConfig(t))
	node := strings.TrimPrefix(n.httpURL, "http://")
	closed := closedURL(t)
	cmds := map[string][]string{
		"check":       {"check", "--policy", "nope", "k"},
		"send":        {"send", "--user", "u1", "--type", "nope"},
		"shorten":     {"shorten", "http://127.0.0.1/private"},
		"healthcheck": {"healthcheck", "--live"},
	}
	for name, args := range cmds {
		reached := exitRefused
		switch name {
		case "healthcheck":
			reached = exitOK
		case "check": // an unknown policy is an error answer: told from no answer by its 404
			reached = exitError
		}
		cases := []struct {
			how  string
			env  map[string]string
			args []string
			want int
		}{
			{"by SLUICE_HTTP_ADDR", map[string]string{"SLUICE_HTTP_ADDR": node}, args, reached},
			{"by SLUICE_SERVER over SLUICE_HTTP_ADDR", map[string]string{"SLUICE_SERVER": n.httpURL, "SLUICE_HTTP_ADDR": strings.TrimPrefix(closed, "http://")}, args, reached},
			{"by --server over SLUICE_SERVER", map[string]string{"SLUICE_SERVER": n.httpURL}, append(slices.Clone(args), "--server", closed), exitError},
		}
		for _, c := range cases {
			if name == "healthcheck" && c.want == exitError {
				c.want = exitRefused // a health check fails with 1
			}
			code, _, errs := runCLI(t, c.env, c.args...)
			if code != c.want {
				t.Errorf("sluice %s %s = %d %q, want %d", name, c.how, code, errs, c.want)
			}
			if name == "check" && strings.Contains(errs, "404") == strings.HasPrefix(c.how, "by --server") {
				t.Errorf("sluice check %s: %q, want the node's 404 only where the node is reached", c.how, errs)
			}
		}
	}
}

// TestFlagsAfterPositionals: every command takes its flags after its
// positional arguments too.
func TestFlagsAfterPositionals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	down := map[string]string{"SLUICE_SERVER": closedURL(t)}
	lines := append(clientCommands(t, dir), []string{"inbox", "list", "u1", "--limit", "5"})
	for _, args := range lines {
		moved := flagsLast(args)
		if code, _, errs := runCLI(t, down, moved...); code != exitError || !strings.Contains(errs, "connect") {
			t.Errorf("sluice %s = %d %q, want %d and the connection error: the flags parsed", strings.Join(moved, " "), code, errs, exitError)
		}
	}
	local := map[string]string{"SLUICE_DATA_DIR": "/nonexistent/ignored"}
	if code, _, errs := runCLI(t, local, "keys", "revoke", "key_nope", "--data-dir", t.TempDir()); code != exitRefused || !strings.Contains(errs, "not found") {
		t.Errorf("keys revoke ID --data-dir DIR = %d %q, want 1: not found in DIR", code, errs)
	}
	if code, _, errs := runCLI(t, nil, "bench", "check-grpc", "--server", closedURL(t), "--duration", "0s"); !strings.Contains(errs, "--duration or --requests must be positive") {
		t.Errorf("bench check-grpc --server URL --duration 0s = %d %q, want the flags read", code, errs)
	}
	if code, _, errs := runCLI(t, nil, "version", "extra"); code != exitError || !strings.Contains(errs, "want no arguments") {
		t.Errorf("version extra = %d %q, want a usage error", code, errs)
	}
}

// flagsLast moves the flags of a command line (every one takes a value)
// after its command, subcommand and positional arguments.
func flagsLast(args []string) []string {
	n := 1
	if commands[args[0]].subs != nil {
		n = 2
	}
	out := slices.Clone(args[:n])
	var flags []string
	for i := n; i < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			flags = append(flags, args[i], args[i+1])
			i++
			continue
		}
		out = append(out, args[i])
	}
	return append(out, flags...)
}
