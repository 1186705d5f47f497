package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goPackage is what the README can name in one directory of the module:
// its top-level declarations, the methods and fields of each type, and
// which file declares what.
type goPackage struct {
	dir     string              // relative to the module root, slash-separated
	decls   map[string]bool     // top-level funcs, types, vars and consts
	members map[string][]string // type -> its methods, fields and interface methods
	files   map[string][]string // file base name -> the names it declares (top-level and methods)
}

// has reports whether the package declares name at top level or as a
// member of one of its types.
func (p *goPackage) has(name string) bool {
	if p.decls[name] {
		return true
	}
	for _, ms := range p.members {
		if slices.Contains(ms, name) {
			return true
		}
	}
	return false
}

// moduleIndex is every package of the module by directory and by package
// name, parsed from the source (no build, no type checking).
type moduleIndex struct {
	root   string
	byDir  map[string]*goPackage
	byName map[string][]*goPackage
}

func indexModule(t *testing.T, root string) *moduleIndex {
	t.Helper()
	idx := &moduleIndex{root: root, byDir: map[string]*goPackage{}, byName: map[string][]*goPackage{}}
	fset := token.NewFileSet()
	walkSources(t, root, func(path string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		p := idx.byDir[rel]
		if p == nil {
			p = &goPackage{dir: rel, decls: map[string]bool{}, members: map[string][]string{}, files: map[string][]string{}}
			idx.byDir[rel] = p
			idx.byName[f.Name.Name] = append(idx.byName[f.Name.Name], p)
		}
		p.add(filepath.Base(path), f)
		return nil
	})
	if len(idx.byDir) < 5 {
		t.Fatalf("found only %d packages under %s; is the walk rooted right?", len(idx.byDir), root)
	}
	return idx
}

// add records the declarations of file f.
func (p *goPackage) add(file string, f *ast.File) {
	declare := func(name string) {
		p.decls[name] = true
		p.files[file] = append(p.files[file], name)
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				declare(d.Name.Name)
				continue
			}
			if recv := receiverType(d.Recv.List[0].Type); recv != "" {
				p.members[recv] = append(p.members[recv], d.Name.Name)
				p.files[file] = append(p.files[file], d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					declare(s.Name.Name)
					p.members[s.Name.Name] = append(p.members[s.Name.Name], typeMembers(s.Type)...)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						declare(n.Name)
					}
				}
			}
		}
	}
}

// receiverType is the type name of a method's receiver: T for T, *T, T[K]
// and *T[K].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// typeMembers lists a struct's fields (an embedded field by its type's
// name) or an interface's methods.
func typeMembers(e ast.Expr) []string {
	var list *ast.FieldList
	switch x := e.(type) {
	case *ast.StructType:
		list = x.Fields
	case *ast.InterfaceType:
		list = x.Methods
	default:
		return nil
	}
	var names []string
	for _, f := range list.List {
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
		if len(f.Names) == 0 {
			if name := receiverType(f.Type); name != "" {
				names = append(names, name)
			} else if sel, ok := f.Type.(*ast.SelectorExpr); ok {
				names = append(names, sel.Sel.Name)
			} else if star, ok := f.Type.(*ast.StarExpr); ok {
				if sel, ok := star.X.(*ast.SelectorExpr); ok {
					names = append(names, sel.Sel.Name)
				}
			}
		}
	}
	return names
}

// dir resolves a path the README names (internal/notify, notify/smtp,
// ratelimit/, web/) to a directory of the module, or "".
func (idx *moduleIndex) dir(path string) string {
	path = strings.TrimSuffix(path, "/")
	for _, candidate := range []string{path, "internal/" + path} {
		if fi, err := os.Stat(filepath.Join(idx.root, filepath.FromSlash(candidate))); err == nil && fi.IsDir() {
			return candidate
		}
	}
	return ""
}

// packages resolves a package the README names by its import name
// (limits) or its path (internal/limits, notify/smtp).
func (idx *moduleIndex) packages(name string) []*goPackage {
	if strings.Contains(name, "/") {
		if p := idx.byDir[idx.dir(name)]; p != nil {
			return []*goPackage{p}
		}
		return nil
	}
	return idx.byName[name]
}

var (
	readmeSpan = regexp.MustCompile("`([^`]+)`")
	// `pkg` (file.go) or `pkg` (file.go, `name`) names a file of pkg and
	// what it declares; `name` (dir/file.go) names the file declaring name.
	readmeInFile = regexp.MustCompile("`([\\w/]+)` \\(([\\w/.]+\\.go)(?:, `(\\w+)`)?\\)")
	qualified    = regexp.MustCompile(`^([a-z]\w*)\.([A-Za-z]\w*)(?:\.([A-Za-z]\w*))?$`)
	exported     = regexp.MustCompile(`^[A-Z]\w*$`)
	lowerIdent   = regexp.MustCompile(`^[a-z]\w*$`)
	// In the diagram names stand without backquotes.
	diagramPath = regexp.MustCompile(`\b(?:internal|ratelimit|cmd)/[a-z][a-z/]*[a-z]`)
	diagramName = regexp.MustCompile(`\b[a-z]\w*\.[A-Z]\w*\b`)
)

// TestReadmeArchitectureNamesExist reads the README's Architecture section
// (its diagram, the traces of a check, a notification and a redirect, and
// the packages table) and fails for every package, file, function, type,
// method or field it names that the source does not declare where the
// README says: the map a newcomer reads first stays true as code moves.
func TestReadmeArchitectureNamesExist(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := architectureSection(string(doc))
	if section == "" {
		t.Fatal(`README.md has no "## Architecture" section`)
	}
	idx := indexModule(t, root)
	checked := 0
	inFence := false
	for line := range strings.Lines(section) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "```"):
			inFence = !inFence
		case inFence:
			for _, p := range diagramPath.FindAllString(line, -1) {
				checked++
				idx.checkPath(t, p)
			}
			for _, q := range diagramName.FindAllString(line, -1) {
				checked++
				idx.checkSpan(t, q, nil)
			}
		case strings.HasPrefix(line, "| `"):
			checked += idx.checkTableRow(t, line)
		default:
			checked += idx.checkProse(t, line)
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d names in the README's Architecture section; is it parsed right?", checked)
	}
}

// architectureSection is the README from "## Architecture" up to the next
// second-level heading.
func architectureSection(doc string) string {
	_, rest, ok := strings.Cut(doc, "\n## Architecture\n")
	if !ok {
		return ""
	}
	section, _, _ := strings.Cut(rest, "\n## ")
	return section
}

// checkProse checks the names on one line of the traces; it returns how
// many it checked.
func (idx *moduleIndex) checkProse(t *testing.T, line string) int {
	t.Helper()
	n := 0
	for _, m := range readmeInFile.FindAllStringSubmatch(line, -1) {
		n++
		name, file, decl := m[1], m[2], m[3]
		if strings.Contains(file, "/") { // `newNode` (cmd/sluice/node.go)
			idx.checkFileDecl(t, idx.byDir[filepath.ToSlash(filepath.Dir(file))], filepath.Base(file), name, m[0])
			continue
		}
		pkgs := idx.packages(name) // `httpapi` (ratelimit.go, `check`)
		if len(pkgs) == 0 {
			t.Errorf("README: %s: no package %s", m[0], name)
			continue
		}
		idx.checkFileDecl(t, pkgs[0], file, decl, m[0])
	}
	for _, m := range readmeSpan.FindAllStringSubmatch(line, -1) {
		if idx.checkSpan(t, m[1], nil) {
			n++
		}
	}
	return n
}

// checkTableRow checks a row of the packages table: the packages in its
// first column (a bare name is a sibling of the one before it) and the
// names in its second, which a bare name means in the row's package.
func (idx *moduleIndex) checkTableRow(t *testing.T, line string) int {
	t.Helper()
	cells := strings.Split(strings.Trim(line, "|"), "|")
	if len(cells) < 2 {
		return 0
	}
	n := 0
	var row *goPackage
	parent := ""
	for _, m := range readmeSpan.FindAllStringSubmatch(cells[0], -1) {
		n++
		path := m[1]
		if !strings.Contains(path, "/") && parent != "" {
			path = parent + "/" + path
		}
		dir := idx.dir(path)
		if dir == "" {
			t.Errorf("README packages table: no directory %s", path)
			continue
		}
		if row == nil {
			row = idx.byDir[dir]
			parent = filepath.ToSlash(filepath.Dir(dir))
		}
	}
	for _, m := range readmeSpan.FindAllStringSubmatch(strings.Join(cells[1:], "|"), -1) {
		if idx.checkSpan(t, m[1], row) {
			n++
		}
	}
	return n
}

// checkSpan checks one backquoted name: a package path, a file, pkg.Name,
// pkg.Type.Member, or a bare exported name (in pkg when pkg is not nil,
// else anywhere in the module). Other spans (commands, routes, flags, JSON)
// are not names of code; checkSpan reports whether it checked s.
func (idx *moduleIndex) checkSpan(t *testing.T, s string, pkg *goPackage) bool {
	t.Helper()
	switch {
	case strings.ContainsAny(s, " *{:\"") || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "/"):
		return false
	case strings.Contains(s, "/"):
		idx.checkPath(t, s)
	case strings.HasSuffix(s, ".go"):
		if _, ok := pkg.files[s]; pkg == nil || !ok {
			t.Errorf("README: no file %s", s)
		}
	case qualified.MatchString(s):
		m := qualified.FindStringSubmatch(s)
		pkgs := idx.packages(m[1])
		if len(pkgs) == 0 {
			if !exported.MatchString(m[2]) {
				return false // a config key such as links.geoip_db
			}
			t.Errorf("README names %s, but the module has no package %s", s, m[1])
			return true
		}
		for _, p := range pkgs {
			if p.decls[m[2]] && (m[3] == "" || slices.Contains(p.members[m[2]], m[3])) {
				return true
			}
		}
		t.Errorf("README names %s, which package %s does not declare", s, pkgs[0].dir)
	case exported.MatchString(s):
		if pkg != nil {
			if !pkg.has(s) {
				t.Errorf("README names %s in %s, which does not declare it", s, pkg.dir)
			}
			return true
		}
		for _, p := range idx.byDir {
			if p.has(s) {
				return true
			}
		}
		t.Errorf("README names %s, which no package declares", s)
	case lowerIdent.MatchString(s):
		if len(idx.byName[s]) > 0 {
			return true // a package by its name
		}
		if pkg == nil {
			return false // a word of the API (request_id) or a name checked by its file
		}
		if !pkg.has(s) && idx.dir(pkg.dir+"/"+s) == "" {
			t.Errorf("README names %s in %s, which neither declares it nor has it as a subpackage", s, pkg.dir)
		}
	default:
		return false
	}
	return true
}

// checkPath checks that a directory or file the README names exists.
func (idx *moduleIndex) checkPath(t *testing.T, path string) {
	t.Helper()
	if strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".md") {
		if _, err := os.Stat(filepath.Join(idx.root, filepath.FromSlash(path))); err != nil {
			t.Errorf("README names the file %s, which does not exist", path)
		}
		return
	}
	if idx.dir(path) == "" {
		t.Errorf("README names the package %s, which does not exist", path)
	}
}

// checkFileDecl checks that pkg has file and, when name is not empty, that
// the file declares name.
func (idx *moduleIndex) checkFileDecl(t *testing.T, pkg *goPackage, file, name, context string) {
	t.Helper()
	if pkg == nil {
		t.Errorf("README: %s: no such package", context)
		return
	}
	decls, ok := pkg.files[file]
	if !ok {
		t.Errorf("README: %s: %s has no file %s", context, pkg.dir, file)
		return
	}
	if name != "" && !slices.Contains(decls, name) {
		t.Errorf("README: %s: %s/%s does not declare %s", context, pkg.dir, file, name)
	}
}

// layers are the classes of the README's packages table, each row's
// description beginning with one and a colon: a domain imports only
// domains and no infrastructure; an adapter connects a domain to the
// outside (a protocol, an engine, a provider); test support serves tests
// and benchmarks only; a command is the binary and what only it uses.
var layers = []string{"domain", "adapter", "test support", "command"}

// tableRow is what the README's packages table says of one package: its
// layer (empty when the row names none) and the reason after it.
type tableRow struct {
	layer, reason string
}

// packageTable reads the packages table of the README's Architecture
// section: each package a row names (relative to the module root, as
// internal/notify/smtp) and its row. A package named twice fails the test.
func packageTable(t *testing.T, root string) map[string]tableRow {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	idx := &moduleIndex{root: root}
	table := map[string]tableRow{}
	for line := range strings.Lines(architectureSection(string(doc))) {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 2 {
			continue
		}
		desc := strings.TrimSpace(strings.Join(cells[1:], "|"))
		row := tableRow{reason: desc}
		for _, l := range layers {
			if rest, ok := strings.CutPrefix(desc, l+":"); ok {
				row = tableRow{layer: l, reason: strings.TrimSpace(rest)}
				break
			}
		}
		parent := ""
		for _, m := range readmeSpan.FindAllStringSubmatch(cells[0], -1) {
			path := m[1]
			if !strings.Contains(strings.TrimSuffix(path, "/"), "/") && parent != "" {
				path = parent + "/" + path
			}
			dir := idx.dir(path)
			if dir == "" {
				continue // TestReadmeArchitectureNamesExist reports it
			}
			if parent == "" {
				parent = filepath.ToSlash(filepath.Dir(dir))
			}
			if _, dup := table[dir]; dup {
				t.Errorf("the README's packages table names %s twice", dir)
			}
			table[dir] = row
		}
	}
	if len(table) < 20 {
		t.Fatalf("the README's packages table names only %d packages; is it parsed right?", len(table))
	}
	return table
}

// TestReadmePackageTableListsEveryPackage fails for a package of the module
// with non-test Go files (go list, run now, so a new or renamed package
// counts at once) that the README's packages table does not name, and for
// a row naming a directory that holds no such package: the map lists every
// room, and only rooms.
func TestReadmePackageTableListsEveryPackage(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	table := packageTable(t, root)
	pkgs := listPackages(t, root)
	for pkg := range pkgs {
		if _, ok := table[pkg]; !ok {
			t.Errorf("README.md: the packages table does not name %s", pkg)
		}
	}
	for dir := range table {
		if _, ok := pkgs[dir]; !ok {
			t.Errorf("README.md: the packages table names %s, which is no package with non-test Go files", dir)
		}
	}
}
