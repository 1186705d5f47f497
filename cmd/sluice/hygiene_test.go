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

// walkSources calls fn with the path of every Go file of the module below
// root but tests, skipping hidden dirs, testdata and node_modules; the
// test fails on the walk's first error.
func walkSources(t *testing.T, root string, fn func(path string) error) {
	t.Helper()
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
		return fn(path)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEveryPackageHasDocComment walks the module and fails for a package
// whose files carry no package doc comment: a newcomer reads those first.
func TestEveryPackageHasDocComment(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	documented := map[string]bool{}
	seen := map[string]bool{}
	walkSources(t, root, func(path string) error {
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

// TestEveryPackageHasALayer fails for a package of the module (as go list
// sees it now, so a new or renamed package counts at once) that the
// README's packages table does not classify as one of layers, with the
// reason after the class: "domain: ...". The table is the one map of the
// layers; the tests below enforce what each class may import.
func TestEveryPackageHasALayer(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	table := packageTable(t, root)
	for pkg := range listPackages(t, root) {
		row, ok := table[pkg]
		switch {
		case !ok:
			t.Errorf("package %s is not in the README's packages table; add a row: | `%s` | <%s>: what it provides |", pkg, pkg, strings.Join(layers, "|"))
		case row.layer == "":
			t.Errorf("the README's packages table does not classify %s: its description must begin with one of %q and a colon, then the reason", pkg, layers)
		case strings.TrimSpace(row.reason) == "":
			t.Errorf("the README's packages table classifies %s as %s without a reason", pkg, row.layer)
		}
	}
}

// TestDomainImportsNoInfrastructure fails when a domain package depends,
// directly or through any other package, on an infrastructure module or on
// a package of the module that is not a domain: adapters import domains,
// never the other way round.
func TestDomainImportsNoInfrastructure(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	table := packageTable(t, root)
	pkgs := listPackages(t, root)
	domains := 0
	for pkg, p := range pkgs {
		if table[pkg].layer != "domain" {
			continue
		}
		domains++
		used := map[string][]string{} // infrastructure prefix -> packages
		for _, dep := range p.deps {
			for _, prefix := range infrastructure {
				if strings.HasPrefix(dep, prefix) {
					used[prefix] = append(used[prefix], dep)
				}
			}
			if _, ours := pkgs[dep]; ours && table[dep].layer != "domain" {
				t.Errorf("domain package %s depends on %s, a %s package; a domain imports only domains", pkg, dep, table[dep].layer)
			}
		}
		for _, prefix := range infrastructure {
			if deps := used[prefix]; len(deps) > 0 {
				t.Errorf("domain package %s depends on %s (%s); move that code to an adapter and reach it through an interface %s declares",
					pkg, prefix, strings.Join(deps, ", "), pkg)
			}
		}
	}
	if domains < 5 {
		t.Errorf("the README's packages table names only %d domain packages; is it parsed right?", domains)
	}
}

// TestLayersPointInward fails when a package depends on a layer it must
// not: production code (domains, adapters, commands) on test support, or
// anything but a command on a command.
func TestLayersPointInward(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	table := packageTable(t, root)
	pkgs := listPackages(t, root)
	for pkg, p := range pkgs {
		layer := table[pkg].layer
		for _, dep := range p.deps {
			if _, ours := pkgs[dep]; !ours {
				continue
			}
			switch to := table[dep].layer; {
			case to == "test support" && layer != "test support":
				t.Errorf("%s package %s depends on %s, which is test support", layer, pkg, dep)
			case to == "command" && layer != "command" && layer != "test support":
				t.Errorf("%s package %s depends on %s, which is a command", layer, pkg, dep)
			}
		}
	}
}

// goPackageDeps is what go list says of one package of the module.
type goPackageDeps struct {
	deps []string // every package it depends on, transitively; the module's relative to the module root
}

// listPackages runs go list on the module and returns its packages that
// have non-test Go files, relative to the module root (internal/notify).
func listPackages(t *testing.T, root string) map[string]goPackageDeps {
	t.Helper()
	const module = "github.com/sluicehq/sluice/"
	// go test puts its own GOROOT/bin first on the test's PATH, so this is
	// the go command building the test.
	cmd := exec.Command("go", "list", "-f", "{{if .GoFiles}}{{.ImportPath}} {{join .Deps \" \"}}{{end}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]goPackageDeps{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var p goPackageDeps
		for _, dep := range fields[1:] {
			p.deps = append(p.deps, strings.TrimPrefix(dep, module))
		}
		pkgs[strings.TrimPrefix(fields[0], module)] = p
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list listed only %d packages; is it rooted right?", len(pkgs))
	}
	return pkgs
}
