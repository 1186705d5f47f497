package envoyrls_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/envoyrls"
)

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

const limitYAML = "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: %s}\n"

func limitFile(n string) string { return strings.Replace(limitYAML, "%s", n, 1) }

// watched starts a server on a folder holding api.yaml with limit n, and
// a Watcher the test polls by hand.
func watched(t *testing.T, n string) (*bundle, *envoyrls.Watcher, string) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "api.yaml"), limitFile(n))
	cfg, err := envoyrls.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := serve(t, cfg, envoyrls.Options{})
	return b, envoyrls.NewWatcher(b.server, dir), dir
}

func TestWatcherReloads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		change     func(t *testing.T, dir string)
		wantPolled bool
		wantErr    string // in the returned error and the log
		want       string // the answer to one request after the poll
		reloads    float64
		failures   float64
	}{
		{"no change, no reload", func(*testing.T, string) {}, false, "", "OK [OK 1/MINUTE r=0 t=60]", 0, 0},
		{"a changed limit is in force", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "api.yaml"), limitFile("5"))
		}, true, "", "OK [OK 5/MINUTE r=4 t=60]", 1, 0},
		{"a new file adds its domain", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "more.yml"), "domain: more\n")
		}, true, "", "OK [OK 1/MINUTE r=0 t=60]", 1, 0},
		{"a bad file keeps the previous rules", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "api.yaml"), limitFile("-5"))
		}, true, "api.yaml:4: descriptors[0].rate_limit.requests_per_unit", "OK [OK 1/MINUTE r=0 t=60]", 0, 1},
		{"a duplicate domain keeps the previous rules", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "copy.yaml"), limitFile("9"))
		}, true, "copy.yaml: duplicate domain", "OK [OK 1/MINUTE r=0 t=60]", 0, 1},
		{"a removed folder keeps the previous rules", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}, true, "no such file", "OK [OK 1/MINUTE r=0 t=60]", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, w, dir := watched(t, "1")
			tt.change(t, dir)
			polled, err := w.Poll()
			if polled != tt.wantPolled || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Poll() = %v, %v; want %v, error containing %q", polled, err, tt.wantPolled, tt.wantErr)
			}
			if tt.wantErr != "" && !strings.Contains(b.logs.String(), tt.wantErr) {
				t.Errorf("logs = %s; want the error with the file's name", b.logs.String())
			}
			if got := summary(b.call(t, req("api", desc("user", "ann")))); got != tt.want {
				t.Errorf("after the poll: %s, want %s", got, tt.want)
			}
			if got := b.metric(t, "sluice_envoy_config_reloads_total"); got != tt.reloads {
				t.Errorf("reloads = %v, want %v", got, tt.reloads)
			}
			if got := b.metric(t, "sluice_envoy_config_reload_failures_total"); got != tt.failures {
				t.Errorf("reload failures = %v, want %v", got, tt.failures)
			}
			if polled, err := w.Poll(); polled {
				t.Errorf("second Poll() = true, %v; want no reload without a change", err)
			}
		})
	}
}

func TestWatcherRecoversAfterABadFile(t *testing.T) {
	t.Parallel()
	b, w, dir := watched(t, "1")
	name := filepath.Join(dir, "api.yaml")
	writeFile(t, name, "domain: api\nnonsense: 1\n")
	if _, err := w.Poll(); err == nil {
		t.Fatal("Poll(bad file) = nil error")
	}
	writeFile(t, name, limitFile("7"))
	if polled, err := w.Poll(); !polled || err != nil {
		t.Fatalf("Poll(fixed file) = %v, %v", polled, err)
	}
	if got, want := summary(b.call(t, req("api", desc("user", "ann")))), "OK [OK 7/MINUTE r=6 t=60]"; got != want {
		t.Errorf("after the fix: %s, want %s", got, want)
	}
}

func TestWatcherRunStopsWithItsContext(t *testing.T) {
	t.Parallel()
	b, w, dir := watched(t, "1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, time.Millisecond) }()
	writeFile(t, filepath.Join(dir, "api.yaml"), limitFile("3"))
	enginetest.Eventually(t, 10*time.Second, "Run reloads the changed file", func() bool {
		return b.metric(t, "sluice_envoy_config_reloads_total") >= 1
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}
