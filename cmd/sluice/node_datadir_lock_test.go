package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSecondServeOnADataDirExits starts a node on a data dir, then a
// second `sluice serve` on the same dir: it must exit at once, non-zero,
// naming the dir and the first node's pid, while the first goes on
// serving; once the first stops, a new node starts on the dir.
func TestSecondServeOnADataDirExits(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	first := runNode(t, cfg, slog.New(slog.DiscardHandler))

	env := map[string]string{"SLUICE_DATA_DIR": cfg.DataDir, "SLUICE_HTTP_ADDR": "127.0.0.1:0", "SLUICE_GRPC_ADDR": "127.0.0.1:0"}
	// Bounded: without the lock the second node might serve until this
	// context ends.
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer scancel()
	began := time.Now()
	var out, errs strings.Builder
	code := run(sctx, []string{"serve"}, &environment{stdout: &out, stderr: &errs, getenv: func(k string) string { return env[k] }})
	took := time.Since(began)
	want := "data dir " + cfg.DataDir + " is in use by another sluice (pid " + strconv.Itoa(os.Getpid()) + ")"
	if code == exitOK || !strings.Contains(errs.String(), want) {
		t.Errorf("second serve = %d, stderr %q; want non-zero and %q", code, errs.String(), want)
	}
	t.Logf("second serve exited %d after %v: %s", code, took, strings.TrimSpace(errs.String()))
	if took > 30*time.Second {
		t.Errorf("second serve took %v to exit, want at once", took)
	}
	if c, _ := get(t, "http://"+first.HTTP+"/readyz"); c != 200 {
		t.Errorf("the first node's /readyz = %d after the second tried, want 200", c)
	}

	if err := first.stop(t, 2*time.Minute); err != nil {
		t.Fatalf("the first node stopped with %v", err)
	}
	n := startNode(t, cfg) // the lock was released: a new node starts
	if c, _ := get(t, n.httpURL+"/readyz"); c != 200 {
		t.Errorf("the node started after the first stopped: /readyz = %d, want 200", c)
	}
}

func TestLockDataDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "new") // created by the lock
	release, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, dataDirLockFile))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file = %q, %v; want this pid", b, err)
	}
	if _, err := lockDataDir(dir); err == nil || !strings.Contains(err.Error(), "in use by another sluice (pid "+strconv.Itoa(os.Getpid())+")") {
		t.Errorf("second lock = %v, want in use, naming the pid", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	release, err = lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	_ = release()
}

func TestUsesDataDir(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		db, nats string
		want     bool
	}{
		{"embedded", "", "", true},
		{"external database", "postgres://db/x", "", true},
		{"external nats", "", "nats://q:4222", true},
		{"all external", "postgres://db/x", "nats://q:4222", false},
	} {
		cfg := testConfig(t)
		cfg.DatabaseURL, cfg.NATSURL = tt.db, tt.nats
		if got := usesDataDir(cfg); got != tt.want {
			t.Errorf("%s: usesDataDir = %v, want %v", tt.name, got, tt.want)
		}
	}
}
