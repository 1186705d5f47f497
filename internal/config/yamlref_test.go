package config

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// yamlKey is one line of the YAML key reference in docs/configuration.md.
type yamlKey struct {
	path, typ, def, values, setBy, meaning string
}

// yamlDefaults are defaults applied where a key is read rather than by
// Default (list items, and the gateway's fallbacks).
var yamlDefaults = map[string]string{
	"gateway.default_tier":                         "free",
	"gateway.anonymous_policy":                     "free",
	"gateway.routes[].policies":                    "tier",
	"gateway.routes[].cost_from_response.estimate": "1",
	"ratelimit.policies[].mode":                    "hard",
	"ratelimit.policies[].on_store_failure":        "open",
	"ratelimit.policies[].sync_interval":           "50ms",
	"gateway.routes[].cost_from_response.policies": "the route's policies",
	"notify.providers.smtp.auth":                   "PLAIN when offered, else LOGIN",
	"ratelimit.policies[].burst":                   "the limit",
	"gateway.routes[].methods":                     "every method",
	"gateway.routes[].count_statuses":              "every status",
}

// yamlValues are the keys whose value is one of a set the code checks.
var yamlValues = map[string][]string{
	"log_format":                            {"text", "json"},
	"log_level":                             {"debug", "info", "warn", "error"},
	"rlqs.unmatched":                        {"allow", "deny"},
	"trusted_proxy_header":                  ProxyHeaders,
	"notify.sms_guard.refuse_types":         smsNumberTypes,
	"notify.providers.failover_categories":  {"critical", "orders", "marketing"},
	"notify.providers.smtp.tls":             {"starttls", "tls", "none"},
	"notify.providers.smtp.auth":            {"plain", "login"},
	"notify.providers.smtp_backup.tls":      {"starttls", "tls", "none"},
	"notify.providers.smtp_backup.auth":     {"plain", "login"},
	"ratelimit.policies[].mode":             {string(limits.Hard), string(limits.Soft), string(limits.Shadow)},
	"ratelimit.policies[].on_store_failure": {string(limits.FailOpen), string(limits.FailClosed)},
	"ratelimit.policies[].sync":             {string(limits.SyncLocal)},
	"ratelimit.policies[].algorithm": {string(ratelimit.TokenBucket), string(ratelimit.GCRA), string(ratelimit.FixedWindow),
		string(ratelimit.SlidingWindowLog), string(ratelimit.SlidingWindowCounter), string(ratelimit.Concurrency)},
}

// fieldDocs reads the doc comments of the struct fields of the packages
// Config is made of, keyed "pkgpath.Type.Field" (anonymous structs add
// their field's name: "...Notify.Retry.Critical.Base").
func fieldDocs(t *testing.T) map[string]string {
	t.Helper()
	const module = "github.com/sluicehq/sluice/"
	docs := map[string]string{}
	for _, pkg := range []string{module + "internal/config", module + "internal/limits"} {
		dir := filepath.Join("..", "..", strings.TrimPrefix(pkg, module))
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if ts, ok := n.(*ast.TypeSpec); ok {
					if st, ok := ts.Type.(*ast.StructType); ok {
						structDocs(docs, pkg+"."+ts.Name.Name, st)
					}
				}
				return true
			})
		}
	}
	return docs
}

func structDocs(docs map[string]string, owner string, st *ast.StructType) {
	var last string // a comment above several fields belongs to all of them
	for _, f := range st.Fields.List {
		text := f.Doc.Text()
		if text == "" {
			text = f.Comment.Text()
		}
		if f.Doc != nil {
			last = text
		} else if text == "" {
			text = last
		}
		for _, n := range f.Names {
			docs[owner+"."+n.Name] = strings.Join(strings.Fields(text), " ")
			if inner, ok := f.Type.(*ast.StructType); ok {
				structDocs(docs, owner+"."+n.Name, inner)
			}
		}
	}
}

// yamlKeys lists every key of the YAML file, nested ones included.
func yamlKeys(t *testing.T) []yamlKey {
	t.Helper()
	w := keyWalker{docs: fieldDocs(t), fields: map[string]Field{}, flags: map[string]Field{}}
	for _, f := range Fields() {
		w.fields[f.YAML], w.flags[f.Flag] = f, f
	}
	ct := reflect.TypeFor[Config]()
	w.walk(ct, reflect.ValueOf(Default()), ct.PkgPath()+"."+ct.Name(), "")
	return w.keys
}

type keyWalker struct {
	docs map[string]string
	// fields and flags are Fields by YAML key and by flag.
	fields, flags map[string]Field
	keys          []yamlKey
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	periodType   = reflect.TypeFor[limits.Period]()
)

// walk adds the keys of struct type st (with value v, invalid inside
// lists) under prefix; owner names st for fieldDocs.
func (w *keyWalker) walk(st reflect.Type, v reflect.Value, owner, prefix string) {
	for i := range st.NumField() {
		sf := st.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" || name == "" {
			continue
		}
		path := strings.TrimPrefix(prefix+"."+name, ".")
		var fv reflect.Value
		if v.IsValid() {
			fv = v.Field(i)
		}
		doc := w.docs[owner+"."+sf.Name]
		ft := sf.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != durationType:
			inner := owner + "." + sf.Name
			if ft.Name() != "" {
				inner = ft.PkgPath() + "." + ft.Name()
			}
			w.walk(ft, fv, inner, path)
		case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
			w.add(path, "mapping", "—", sf, doc)
			w.walk(ft.Elem(), reflect.Value{}, ft.Elem().PkgPath()+"."+ft.Elem().Name(), path)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			w.add(path, "list of mappings", "—", sf, doc)
			w.walk(ft.Elem(), reflect.Value{}, ft.Elem().PkgPath()+"."+ft.Elem().Name(), path+"[]")
		default:
			w.add(path, yamlType(ft), formatDefault(fv), sf, doc)
		}
	}
}

func (w *keyWalker) add(path, typ, def string, sf reflect.StructField, doc string) {
	k := yamlKey{path: path, typ: typ, def: def, setBy: "YAML only", meaning: sf.Tag.Get("usage")}
	if f, ok := w.fields[path]; ok { // a backup's flag and usage are its primary's, rewritten
		k.setBy, k.meaning = fmt.Sprintf("`--%s`, `%s`", f.Flag, f.Env), f.Usage
		if f.inherits != "" {
			k.def = w.flags[f.inherits].YAML
		}
	}
	if d, ok := yamlDefaults[path]; ok {
		k.def = d
	}
	if k.meaning == "" {
		k.meaning = plainDoc(sf.Name, doc)
	}
	if vs := yamlValues[path]; vs != nil {
		k.values = "`" + strings.Join(vs, "`, `") + "`"
	}
	w.keys = append(w.keys, k)
}

// plainDoc drops the Go name a doc comment starts with ("Path is a path
// prefix" becomes "a path prefix").
func plainDoc(goName, doc string) string {
	if rest, ok := strings.CutPrefix(doc, goName+", "); ok {
		return strings.TrimSuffix(rest, ".")
	}
	if rest, ok := strings.CutPrefix(doc, goName+" "); ok {
		for _, verb := range []string{"is ", "are "} {
			rest = strings.TrimPrefix(rest, verb)
		}
		doc = rest
	}
	return strings.TrimSuffix(doc, ".")
}

func yamlType(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t == periodType:
		return "duration or days (`2d`)"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "list of strings"
	case t.Kind() == reflect.Slice:
		return "list of integers"
	case t.Kind() == reflect.Map:
		return "mapping of strings"
	case t.Kind() == reflect.Bool:
		return "boolean"
	case t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "integer"
	default:
		return "string"
	}
}

func formatDefault(v reflect.Value) string {
	if !v.IsValid() {
		return "—"
	}
	switch {
	case v.Type() == durationType:
		return limits.Period(v.Int()).String()
	case v.Kind() == reflect.String && v.String() == "", v.Kind() == reflect.Slice && v.Len() == 0, v.Kind() == reflect.Map && v.Len() == 0:
		return "—"
	case v.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v.Interface())
}

// yamlReference renders the keys as a Markdown table.
func yamlReference(keys []yamlKey) string {
	var b strings.Builder
	b.WriteString("| YAML key | type | default | values | set by | meaning |\n|---|---|---|---|---|---|\n")
	for _, k := range keys {
		def := k.def
		if def != "—" && !strings.Contains(def, " ") { // a value, not words about one
			def = "`" + def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", k.path, k.typ, def, k.values, k.setBy, strings.ReplaceAll(k.meaning, "|", "\\|"))
	}
	return b.String()
}

// TestYAMLReferenceDoc keeps docs/configuration.md's list of YAML keys in
// step with Config: a key added without a doc comment or usage fails here,
// and one added with it fails until the file is regenerated with
// `go test ./internal/config -run TestYAMLReferenceDoc -update`.
func TestYAMLReferenceDoc(t *testing.T) {
	keys := yamlKeys(t)
	for _, k := range keys {
		if k.meaning == "" {
			t.Errorf("YAML key %s has neither a usage tag nor a doc comment", k.path)
		}
	}
	for path := range yamlValues {
		if !hasKey(keys, path) {
			t.Errorf("yamlValues names %s, which is no YAML key", path)
		}
	}
	for path := range yamlDefaults {
		if !hasKey(keys, path) {
			t.Errorf("yamlDefaults names %s, which is no YAML key", path)
		}
	}
	checkGenerated(t, "<!-- BEGIN GENERATED YAML KEYS: go test ./internal/config -update -->\n", yamlReference(keys))
}

func hasKey(keys []yamlKey, path string) bool {
	for _, k := range keys {
		if k.path == path {
			return true
		}
	}
	return false
}

// checkGenerated compares the text after begin (up to the next END
// GENERATED marker) in docs/configuration.md with want, and rewrites it
// with -update.
func checkGenerated(t *testing.T, begin, want string) {
	t.Helper()
	const path, end = "../../docs/configuration.md", "<!-- END GENERATED -->"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, begin)
	j := strings.Index(doc[max(i, 0):], end) + max(i, 0)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q ... %q", path, begin, end)
	}
	updated := doc[:i+len(begin)] + want + doc[j:]
	if doc == updated {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date with Config; run: go test ./internal/config -update", path)
}

// TestYAMLValuesAreChecked holds yamlValues to the code: each listed value
// of a key set by a flag is accepted, and another one refused.
func TestYAMLValuesAreChecked(t *testing.T) {
	t.Parallel()
	flags := map[string]string{}
	for _, f := range Fields() {
		flags[f.YAML] = f.Flag
	}
	for path, values := range yamlValues {
		fl := flags[path]
		if fl == "" || strings.HasPrefix(fl, "smtp-") { // policies are checked below; SMTP's by its client
			continue
		}
		for _, v := range values {
			if _, err := load(t, []string{"--" + fl, v}, nil); err != nil && strings.Contains(err.Error(), "--"+fl) {
				t.Errorf("--%s %s: Load() error = %v", fl, v, err)
			}
		}
		if _, err := load(t, []string{"--" + fl, "bogus"}, nil); err == nil || !strings.Contains(err.Error(), "--"+fl) {
			t.Errorf("--%s bogus: Load() error = %v, want one naming the flag", fl, err)
		}
	}
	base := limits.NamedPolicy{Name: "p", Algorithm: ratelimit.TokenBucket, Limit: 10, Period: limits.Period(time.Minute)}
	for _, v := range yamlValues["ratelimit.policies[].algorithm"] {
		p := base
		p.Algorithm = ratelimit.Algorithm(v)
		if fe := p.FieldErrors(""); len(fe) != 0 {
			t.Errorf("algorithm %s: %v", v, fe)
		}
	}
	for _, v := range yamlValues["ratelimit.policies[].mode"] {
		p := base
		p.Mode = limits.Mode(v)
		if p.Mode == limits.Soft {
			p.BurstOver = 1
		}
		if fe := p.FieldErrors(""); len(fe) != 0 {
			t.Errorf("mode %s: %v", v, fe)
		}
	}
	bogus := base
	bogus.Algorithm, bogus.Mode, bogus.OnStoreFailure, bogus.Sync = "bogus", "bogus", "bogus", "bogus"
	if fe := bogus.FieldErrors(""); len(fe) < 4 {
		t.Errorf("bogus algorithm, mode, on_store_failure and sync: %v, want four problems", fe)
	}
}
