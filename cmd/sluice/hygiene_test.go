package main

import (
	"go/parser"
	"go/token"
	"io/fs"
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
