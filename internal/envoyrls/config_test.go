package envoyrls

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// golden compares got with testdata file name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(name, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n got: %s\nwant: %s", name, got, want)
	}
}

func TestLoadValidFixtures(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			c, err := Load(f)
			if err != nil {
				t.Fatalf("Load(%s) = %v", f, err)
			}
			golden(t, strings.TrimSuffix(f, ".yaml")+".golden", c.Dump())
		})
	}
}

func TestLoadInvalidFixtures(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) < 15 {
		t.Fatalf("only %d invalid fixtures", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			_, err := Load(f)
			if err == nil {
				t.Fatalf("Load(%s) = nil error, want one", f)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("Load(%s) = %v, want it to wrap ErrInvalidConfig", f, err)
			}
			if !strings.Contains(err.Error(), f) {
				t.Errorf("Load(%s) = %v, want the file named", f, err)
			}
			golden(t, strings.TrimSuffix(f, ".yaml")+".err", err.Error()+"\n")
		})
	}
}

func TestLoadFolder(t *testing.T) {
	t.Parallel()
	c, err := Load("testdata/valid")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(c.Domains(), ","), "edge_proxy_per_ip,mongo_cps,nothing_yet"; got != want {
		t.Errorf("Domains() = %s, want %s", got, want)
	}
	if len(c.Files()) != 3 {
		t.Errorf("Files() = %v, want the three .yaml files", c.Files())
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, path, want string
	}{
		{"duplicate domain across files", "testdata/dupdomain", `testdata/dupdomain/b.yml: duplicate domain "shared" (already in testdata/dupdomain/a.yaml)`},
		{"missing path", filepath.Join(dir, "nope"), "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(%s) = %v, want an error containing %q", tt.path, err, tt.want)
			}
		})
	}
}

func TestLoadEmptyFolder(t *testing.T) {
	t.Parallel()
	c, err := Load(t.TempDir())
	if err != nil || len(c.Domains()) != 0 {
		t.Errorf("Load(empty folder) = %v, %v; want no domains, no error", c.Domains(), err)
	}
}

func TestLoadSkipsHiddenAndOtherFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
	write(t, filepath.Join(dir, ".hidden.yaml"), "not valid: [\n")
	write(t, filepath.Join(dir, "README.md"), "# notes\n")
	if err := os.Mkdir(filepath.Join(dir, "..data.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir)
	if err != nil || strings.Join(c.Domains(), ",") != "a" {
		t.Errorf("Load = %v, %v; want domain a only", c.Domains(), err)
	}
}

func TestAliasExpansionIsBounded(t *testing.T) {
	t.Parallel()
	// Each level holds the previous one twice (under distinct keys, so no
	// duplicate stops the walk early): 2^25 nodes if expanded.
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n  - &a0 {key: k0}\n")
	for i := 1; i <= 24; i++ {
		p := "*a" + strconv.Itoa(i-1)
		fmt.Fprintf(&b, "  - &a%d {key: k%d, descriptors: [%s, {key: b, descriptors: [%s]}]}\n", i, i, p, p)
	}
	_, err := Parse(map[string][]byte{"bomb.yaml": []byte(b.String())})
	if err == nil || !strings.Contains(err.Error(), "YAML nodes") {
		t.Fatalf("Parse(alias bomb) = %v, want the node bound", err)
	}
}

func write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
