package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// startCLINode starts a node for client commands and returns it with the
// environment that points them at it (SLUICE_SERVER).
func startCLINode(t *testing.T) (*testNode, map[string]string) {
	t.Helper()
	n := startNode(t, testConfig(t))
	return n, map[string]string{"SLUICE_SERVER": n.httpURL}
}

// runCLI runs one command line in-process with env as the environment.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &environment{stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

func TestKeysCommands(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SLUICE_DATA_DIR": t.TempDir()}
	code, out, errs := runCLI(t, env, "keys", "create", "--scope", "admin", "--scope", "notify:send,links:write", "--name", "ops")
	if code != 0 {
		t.Fatalf("keys create = %d: %s", code, errs)
	}
	secret := strings.TrimSpace(out)
	if !strings.HasPrefix(secret, "sk_") || strings.Contains(secret, "\n") {
		t.Fatalf("keys create printed %q, want only the secret", out)
	}
	code, out, _ = runCLI(t, env, "keys", "list")
	if code != 0 || !strings.Contains(out, "ops") || !strings.Contains(out, "notify:send") || strings.Contains(out, secret) {
		t.Fatalf("keys list = %d %q; want the key without its secret", code, out)
	}
	id := strings.Fields(strings.Split(out, "\n")[1])[0]
	if code, _, errs := runCLI(t, env, "keys", "revoke", id); code != 0 {
		t.Fatalf("keys revoke = %d: %s", code, errs)
	}
	if code, _, errs := runCLI(t, env, "keys", "revoke", id+"x"); code != 1 || !strings.Contains(errs, "not found") {
		t.Errorf("revoke unknown = %d %q, want 1 and not found", code, errs)
	}
	if code, _, errs := runCLI(t, env, "keys", "create", "--scope", "root"); code == 0 || !strings.Contains(errs, "unknown scope") {
		t.Errorf("bad scope = %d %q", code, errs)
	}
	if code, _, errs := runCLI(t, env, "keys", "create"); code == 0 || !strings.Contains(errs, "--scope is required") {
		t.Errorf("no scope = %d %q", code, errs)
	}
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SLUICE_DATA_DIR": t.TempDir()}
	code, out, errs := runCLI(t, env, "migrate")
	if code != 0 || !strings.Contains(out, "applied") {
		t.Fatalf("first migrate = %d %q %q", code, out, errs)
	}
	code, out, _ = runCLI(t, env, "migrate")
	if code != 0 || !strings.Contains(out, "up to date") {
		t.Errorf("second migrate = %d %q, want up to date", code, out)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int
		wantOut    string
		wantErrAll []string
	}{
		{name: "version", args: []string{"version"}, wantOut: "sluice "},
		{name: "help", args: []string{"help"}, wantOut: "serve"},
		{name: "no command", args: nil, wantCode: 2, wantOut: "Usage"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 2, wantErrAll: []string{"unknown command"}},
		{name: "serve help", args: []string{"help", "serve"}, wantOut: "--http-addr string\n    \tHTTP listen address"},
		{name: "every config problem at once", args: []string{"serve", "--http-addr", "nope", "--log-level", "loud"},
			env: map[string]string{"SLUICE_REDIS_URL": "ftp://x"}, wantCode: 2,
			wantErrAll: []string{"--http-addr", "--log-level", "--redis-url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errs := runCLI(t, tt.env, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit = %d, want %d (stderr %q)", code, tt.wantCode, errs)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("stdout = %q, want it to contain %q", out, tt.wantOut)
			}
			for _, w := range tt.wantErrAll {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr = %q, want it to contain %q", errs, w)
				}
			}
		})
	}
}
