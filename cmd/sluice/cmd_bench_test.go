package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestBenchCommand runs every default scenario briefly on an in-process
// node (and the load scenarios on the bare comparison targets too): one
// row per scenario and target, and no errors.
func TestBenchCommand(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI(t, nil, "bench", "--requests", "200", "--workers", "4", "--keys", "16", "--links", "5",
		"--campaign", "50", "--compare", "bare")
	if code != 0 {
		t.Fatalf("sluice bench = %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var got []string
	for _, row := range lines[1:] {
		f := strings.Fields(row)
		if len(f) < 10 {
			t.Fatalf("row %q is not a table row:\n%s", row, out)
		}
		got = append(got, f[0]+"/"+f[1])
		ok, _ := strconv.Atoi(f[3])
		if f[4] != "0" || ok == 0 {
			t.Errorf("row %q: want some OK requests and 0 errors", row)
		}
		if strings.HasPrefix(f[0], "check-") || f[0] == "redirect" || f[0] == "notify-accept" {
			if ok != 200 {
				t.Errorf("row %q: want exactly --requests (200) OK", row)
			}
		}
		if f[0]+"/"+f[1] == "redirect/sluice" && !strings.Contains(row, "200 hits recorded for 200 redirects") {
			t.Errorf("row %q: want every redirect recorded as a hit", row)
		}
	}
	want := []string{"check-http/sluice", "check-http/compare", "check-grpc/sluice", "check-grpc/compare",
		"redirect/sluice", "redirect/compare", "notify-accept/sluice", "notify-deliver/sluice",
		"campaign-accept/sluice", "campaign-deliver/sluice", "campaign-otp/sluice"}
	if !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	if strings.Contains(out, "first error") {
		t.Errorf("errors reported:\n%s", out)
	}
}

// TestBenchNotifyMix: with --notify-mix seeds, three notifications in four
// go to email and push and one to email only: 40 requests make 70
// deliveries, and the drain waits for exactly those.
func TestBenchNotifyMix(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI(t, nil, "bench", "--requests", "40", "--workers", "4", "--notify-mix", "seeds", "notify")
	if code != 0 {
		t.Fatalf("sluice bench = %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	ok := map[string]string{}
	for _, row := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(row); len(f) > 3 {
			ok[f[0]] = f[3]
		}
	}
	if ok["notify-accept"] != "40" || ok["notify-deliver"] != "70" {
		t.Errorf("OK counts %v, want notify-accept 40 and notify-deliver 70\n%s", ok, out)
	}
}

func TestBenchRefusesBadArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown scenario", []string{"bench", "nope"}, `unknown scenario "nope"`},
		{"unknown mix", []string{"bench", "--notify-mix", "some"}, "want all or seeds"},
		{"unbounded", []string{"bench", "--duration", "0"}, "--duration or --requests"},
		{"engines with a server", []string{"bench", "--server", "http://127.0.0.1:1", "--redis-url", "redis://x"}, "in-process node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errs := runCLI(t, nil, tt.args...)
			if code == 0 || !strings.Contains(errs, tt.want) {
				t.Errorf("%v = %d %q, want a failure saying %q", tt.args, code, errs, tt.want)
			}
		})
	}
}

// TestBenchProfiles: --cpuprofile and --blockprofile write pprof files
// that go tool pprof can read (a gzipped protobuf: the magic 1f 8b).
func TestBenchProfiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cpu, block := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "block.pprof")
	code, out, errs := runCLI(t, nil, "bench", "--requests", "50", "--workers", "2", "--keys", "4",
		"--cpuprofile", cpu, "--blockprofile", block, "check-http")
	if code != 0 {
		t.Fatalf("sluice bench = %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	for _, f := range []string{cpu, block} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: not a gzipped pprof profile (%d bytes)", f, len(b))
		}
	}
}
