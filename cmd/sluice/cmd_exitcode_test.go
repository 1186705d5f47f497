package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// closedURL returns the URL of a loopback port nothing listens on, held
// for the test so that no other test can listen there meanwhile.
func closedURL(t *testing.T) string {
	t.Helper()
	return "http://" + enginetest.RefusedAddr(t)
}

// clientCommands returns one command line of every client command and
// subcommand, with files it needs in dir; each names things the server
// does not know, so a running node refuses every one.
func clientCommands(t *testing.T, dir string) [][]string {
	t.Helper()
	users := filepath.Join(dir, "users.csv")
	rules := filepath.Join(dir, "rules.json")
	if err := os.WriteFile(users, []byte("user_id\nu1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rules, []byte("[]"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(dir, "template.json")
	if err := os.WriteFile(tmpl, []byte(`{"channels": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return [][]string{
		{"check", "--policy", "free", "--cost", "100000", "k"},
		{"send", "--user", "u1", "--type", "nope"},
		{"campaign", "send", "--type", "nope", "--users", users},
		{"shorten", "http://127.0.0.1/private"},
		{"links", "get", "nope"},
		{"links", "rules", "nope", "--file", rules},
		{"links", "stats", "nope"},
		{"links", "qr", "nope", "--out", filepath.Join(dir, "qr.png")},
		{"links", "convert", "--click-id", "nope", "--event", "sale"},
		{"notifications", "get", "ntf_nope"},
		{"notifications", "cancel", "ntf_nope"},
		{"events", "get", "nope"},
		{"events", "delete", "nope"},
		{"events", "recover", "nope", "--since", "1h"},
		{"events", "create", "--url", "ftp://nope", "--events", "nope"},
		{"inbox", "read", "u1", "msg_nope"},
		{"inbox", "unread", "u1", "msg_nope"},
		{"inbox", "archive", "u1", "msg_nope"},
		{"inbox", "token", "u1", "--ttl", "1000000h"},
		{"links", "delete", "nope"},
		{"templates", "get", "nope"},
		{"templates", "delete", "nope"},
		{"templates", "put", "nope", "--file", tmpl},
		{"dead-letters", "replay", "dl_nope"},
		{"policies", "get", "nope"},
		{"policies", "delete", "nope"},
		{"policies", "put", "nope", "--algorithm", "nope", "--limit", "1", "--period", "1m"},
		{"blocks", "delete", "nope"},
	}
}

// TestExitCodes runs every client command against a closed port (exit 2:
// a connection error) and against a node that refuses it (exit 1).
func TestExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	commands := clientCommands(t, dir)
	extra := [][]string{{"events", "list"}, {"inbox", "list", "u1"}, {"inbox", "read-all", "u1"}, {"inbox", "revoke-tokens", "u1"},
		{"links", "list"}, {"templates", "list"}, {"dead-letters", "list"}, {"policies", "list"}, {"blocks", "list"},
		{"blocks", "add", "k", "--duration", "1m"}}
	down := map[string]string{"SLUICE_SERVER": closedURL(t)}
	for _, args := range append(commands, extra...) {
		if code, _, errs := runCLI(t, down, args...); code != exitError || !strings.Contains(errs, "connect") {
			t.Errorf("sluice %s against a closed port = %d %q, want %d and the connection error", strings.Join(args, " "), code, errs, exitError)
		}
	}
	n := startNode(t, testConfig(t))
	up := map[string]string{"SLUICE_SERVER": n.httpURL}
	for _, args := range commands {
		if args[0] == "check" {
			continue // below: an invalid check is an error answer
		}
		if code, _, errs := runCLI(t, up, args...); code != exitRefused {
			t.Errorf("sluice %s against a node = %d %q, want %d: a refusal", strings.Join(args, " "), code, errs, exitRefused)
		}
	}
	// check exits 1 only for a refused check: an error answer is exit 2.
	if code, _, errs := runCLI(t, up, "check", "--policy", "free", "--cost", "60", "refused"); code != exitOK {
		t.Fatalf("check of a full allowance = %d %q", code, errs)
	}
	if code, out, errs := runCLI(t, up, "check", "--policy", "free", "refused"); code != exitRefused || !strings.HasPrefix(out, "refused") {
		t.Errorf("check over the limit = %d %q %q, want %d: a refusal", code, out, errs, exitRefused)
	}
	for _, args := range [][]string{
		{"check", "--policy", "nope", "k"},                     // unknown policy: 404
		{"check", "--policy", "free", "--cost", "100000", "k"}, // more than the policy ever admits: 400
	} {
		if code, _, errs := runCLI(t, up, args...); code != exitError || !strings.Contains(errs, "sluice check: 4") {
			t.Errorf("sluice %s = %d %q, want %d: an error answer, not a refusal", strings.Join(args, " "), code, errs, exitError)
		}
	}
}

// TestExitCodesOfLocalCommands covers the commands that work on the
// node's own database and the health check.
func TestExitCodesOfLocalCommands(t *testing.T) {
	t.Parallel()
	local := map[string]string{"SLUICE_DATA_DIR": t.TempDir()}
	if code, _, errs := runCLI(t, local, "keys", "revoke", "key_nope"); code != exitRefused || !strings.Contains(errs, "not found") {
		t.Errorf("keys revoke of an unknown key = %d %q, want %d", code, errs, exitRefused)
	}
	noDB := map[string]string{"SLUICE_DATA_DIR": t.TempDir(),
		"SLUICE_DATABASE_URL": "postgres://postgres@" + strings.TrimPrefix(closedURL(t), "http://") + "/x?sslmode=disable&connect_timeout=5"}
	for _, args := range [][]string{{"keys", "list"}, {"migrate"}} {
		if code, _, errs := runCLI(t, noDB, args...); code != exitError {
			t.Errorf("sluice %s with the database down = %d %q, want %d", strings.Join(args, " "), code, errs, exitError)
		}
	}
	usage := [][]string{{"check"}, {"send", "--nope"}, {"links", "frob"}, {"shorten"}, {"keys", "create"}, {"campaign", "send", "--type", "x", "--users", "/nonexistent.csv"}}
	for _, args := range usage { // a data dir of its own: a usage error must not touch ./sluice-data
		if code, _, errs := runCLI(t, map[string]string{"SLUICE_DATA_DIR": t.TempDir()}, args...); code != exitError {
			t.Errorf("sluice %s = %d %q, want %d: a usage error", strings.Join(args, " "), code, errs, exitError)
		}
	}
	// A container runtime reads any code but 0 and 1 as misuse.
	addr := strings.TrimPrefix(closedURL(t), "http://")
	if code, _, errs := runCLI(t, map[string]string{"SLUICE_HTTP_ADDR": addr}, "healthcheck"); code != exitRefused || !strings.Contains(errs, "unhealthy") {
		t.Errorf("healthcheck of a node that is down = %d %q, want 1", code, errs)
	}
}
