package main

import (
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasDocComment walks the module and fails for a package
// whose files carry no package doc comment: a newcomer reads those first.
func TestEveryPackageHasDocComment(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	documented := map[string]bool{}
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		seen[dir] = true
		if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
			documented[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 5 {
		t.Fatalf("found only %d packages under %s; is the walk rooted right?", len(seen), root)
	}
	for dir := range seen {
		if !documented[dir] {
			rel, _ := filepath.Rel(root, dir)
			t.Errorf("package %s has no package doc comment", rel)
		}
	}
}

// domainPackages are the packages at the centre: the domains and the public
// rate limit library. They declare interfaces that adapters implement and
// import no infrastructure.
var domainPackages = []string{"internal/notify", "internal/notify/guard", "internal/inbox", "internal/events", "internal/shorten", "internal/limits", "ratelimit"}

// infrastructure are the module path prefixes of metrics, database, Redis
// and NATS clients (see go.mod).
var infrastructure = []string{
	"github.com/prometheus/",
	"github.com/jackc/pgx",
	"modernc.org/sqlite",
	"github.com/redis/",
	"github.com/go-redis/",
	"github.com/nats-io/",
}

// TestDomainImportsNoInfrastructure fails when a domain package depends,
// directly or through any other package, on an infrastructure module:
// adapters import domains, never the other way round.
func TestDomainImportsNoInfrastructure(t *testing.T) {
	t.Parallel()
	const module = "github.com/sluicehq/sluice/"
	// go test puts its own GOROOT/bin first on the test's PATH, so this is
	// the go command building the test.
	args := []string{"list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}
	for _, p := range domainPackages {
		args = append(args, "./"+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	listed := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], module)
		listed[pkg] = true
		used := map[string][]string{} // infrastructure prefix -> packages
		for _, dep := range fields[1:] {
			for _, prefix := range infrastructure {
				if strings.HasPrefix(dep, prefix) {
					used[prefix] = append(used[prefix], dep)
				}
			}
		}
		for _, prefix := range infrastructure {
			if deps := used[prefix]; len(deps) > 0 {
				t.Errorf("domain package %s depends on %s (%s); move that code to an adapter and reach it through an interface %s declares",
					pkg, prefix, strings.Join(deps, ", "), pkg)
			}
		}
	}
	for _, p := range domainPackages {
		if !listed[p] {
			t.Errorf("go list did not list %s; is the list rooted right?", p)
		}
	}
}
