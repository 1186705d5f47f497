package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// TestVersionEverywhere: `sluice version`, /healthz and sluice_build_info
// report the same build, read from the binary's build info.
func TestVersionEverywhere(t *testing.T) {
	t.Parallel()
	b := readBuild()
	if b.Version == "" || b.Revision == "" || b.GoVersion != runtime.Version() {
		t.Fatalf("readBuild() = %+v; want every field set", b)
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &environment{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}); code != 0 {
		t.Fatalf("sluice version = %d: %s", code, out.String())
	}
	for _, want := range []string{"sluice " + b.Version + "\n", "revision: " + b.Revision + "\n", "go: " + strings.TrimPrefix(runtime.Version(), "go")} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sluice version printed %q; want %q in it", out.String(), want)
		}
	}

	n := startNode(t, testConfig(t))
	_, body := get(t, n.httpURL+"/healthz")
	var health struct{ Status, Version string }
	if err := json.Unmarshal(body, &health); err != nil || health.Version != b.Version {
		t.Errorf("/healthz = %s; want version %q", body, b.Version)
	}
	_, body = get(t, n.httpURL+"/metrics")
	want := fmt.Sprintf(`sluice_build_info{goversion=%q,revision=%q,version=%q} 1`, b.GoVersion, b.Revision, b.Version)
	if !strings.Contains(string(body), want+"\n") {
		t.Errorf("/metrics lacks %s", want)
	}
}

// TestVersionOverride: -ldflags "-X main.version=..." wins over the build info.
func TestVersionOverride(t *testing.T) {
	old := version
	version = "v1.2.3"
	defer func() { version = old }()
	if got := readBuild().Version; got != "v1.2.3" {
		t.Errorf("readBuild().Version = %q with main.version set; want v1.2.3", got)
	}
}

// TestVersionSaysNothingItCannotKnow: a test binary carries no VCS
// stamp, so `sluice version` must not claim the checkout was unmodified.
func TestVersionSaysNothingItCannotKnow(t *testing.T) {
	t.Parallel()
	if b := readBuild(); b.VCS {
		t.Skip("this binary carries VCS information")
	}
	code, out, errs := runCLI(t, nil, "version")
	if code != 0 || strings.Contains(out, "modified") || !strings.Contains(out, "revision: unknown") {
		t.Errorf("sluice version = %d %q %q, want the revision unknown and no modified line", code, out, errs)
	}
}
