package config

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Field describes one configuration setting, derived from the struct tags.
type Field struct {
	YAML  string // dotted YAML path, e.g. "notify.retry.base"
	Flag  string // command-line flag without dashes
	Env   string // environment variable
	Usage string
	Type  string // "string", "bool", "int", "duration", "list"
	index []int
	// inherits is, for a backup's setting taken from its primary when
	// empty, the primary's flag.
	inherits string
}

// Fields lists every setting of Config in declaration order.
func Fields() []Field { return fields(reflect.TypeFor[Config](), nil, "", "") }

// fields lists the settings of struct type t, at index in Config and under
// the YAML path prefix. A struct field tagged `backup:"smtp-backup"` holds
// a backup's settings: each flag of its type gets the tag in place of its
// first word (smtp-addr becomes smtp-backup-addr); backup is that tag while
// fields walks such a field's type.
func fields(t reflect.Type, index []int, prefix, backup string) []Field {
	var out []Field
	for i := range t.NumField() {
		sf := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		path := name
		if prefix != "" && name != "-" {
			path = prefix + "." + name
		}
		if sf.Type.Kind() == reflect.Struct && sf.Type != reflect.TypeFor[time.Duration]() {
			out = append(out, fields(sf.Type, idx, path, cmp.Or(sf.Tag.Get("backup"), backup))...)
			continue
		}
		fl := sf.Tag.Get("flag")
		if fl == "" {
			continue
		}
		if name == "-" {
			path = ""
		}
		f := Field{YAML: path, Flag: fl, Usage: sf.Tag.Get("usage"), Type: typeName(sf.Type), index: idx}
		if backup != "" {
			f = backupField(f, sf, backup)
		}
		f.Env = "SLUICE_" + strings.ToUpper(strings.ReplaceAll(f.Flag, "-", "_"))
		out = append(out, f)
	}
	return out
}

// backupField is primary's setting f (of field sf) as the backup's named
// backup: its flag renamed, its usage the backupusage tag or the
// primary's marked as the backup's, and, where the backup inherits it, its
// "empty ..." clause saying it takes the primary's instead.
func backupField(f Field, sf reflect.StructField, backup string) Field {
	primary := f.Flag
	_, rest, _ := strings.Cut(primary, "-")
	f.Flag = backup + "-" + rest
	if u := sf.Tag.Get("backupusage"); u != "" {
		f.Usage = u
	} else {
		f.Usage = "backup: " + f.Usage
	}
	if inherits(sf) {
		f.inherits = primary
		f.Usage, _, _ = strings.Cut(f.Usage, "; empty ")
		f.Usage += "; empty uses --" + primary
	}
	return f
}

func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "duration"
	case t.Kind() == reflect.Slice:
		return "list"
	case t.Kind() == reflect.Bool:
		return "bool"
	case t.Kind() == reflect.Int, t.Kind() == reflect.Int64, t.Kind() == reflect.Int32:
		return "int"
	case t.Kind() == reflect.Float64:
		return "float"
	default:
		return "string"
	}
}

// rawValue is a flag.Value that only records what was given; values are
// applied after the file and the environment, so that flags win.
type rawValue struct {
	s      string
	typ    string // Field.Type, the placeholder help shows
	isBool bool
}

func (r *rawValue) String() string     { return r.s }
func (r *rawValue) Set(s string) error { r.s = s; return nil }
func (r *rawValue) IsBoolFlag() bool   { return r.isBool }

// Type names the kind of value the flag takes, for help texts.
func (r *rawValue) Type() string { return r.typ }

// Flags is every setting's flag registered on one flag set; Config reads
// them once the set is parsed.
type Flags struct {
	fs   *flag.FlagSet
	raws map[string]*rawValue
}

// NewFlags registers a flag for every setting on fs, its usage ending with
// its default and environment variable.
func NewFlags(fs *flag.FlagSet) *Flags {
	all := Fields()
	f := &Flags{fs: fs, raws: make(map[string]*rawValue, len(all))}
	def := reflect.ValueOf(Default())
	for _, fd := range all {
		rv := &rawValue{typ: fd.Type, isBool: fd.Type == "bool"}
		f.raws[fd.Flag] = rv
		usage := fd.Usage
		if d := fmt.Sprint(def.FieldByIndex(fd.index).Interface()); d != "" && d != "false" && d != "0" && d != "[]" {
			usage += fmt.Sprintf(" (default %s)", d)
		}
		fs.Var(rv, fd.Flag, usage+" ["+fd.Env+"]")
	}
	return f
}

// Load builds a Config from defaults, the YAML file named by --config or
// SLUICE_CONFIG, the environment (getenv; os.Getenv when nil) and args. It
// returns the remaining positional arguments. Every problem found is reported
// at once, including Validate's.
func Load(fs *flag.FlagSet, args []string, getenv func(string) string) (Config, []string, error) {
	f := NewFlags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, nil, err
	}
	cfg, err := f.Config(getenv)
	return cfg, fs.Args(), err
}

// Config builds the Config from defaults, the YAML file named by --config
// or SLUICE_CONFIG, the environment (getenv; os.Getenv when nil) and the
// flags given, once the flag set is parsed. Every problem found is
// reported at once, including Validate's.
func (f *Flags) Config(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })

	cfg := Default()
	var errs []error
	path := getenv("SLUICE_CONFIG")
	if set["config"] {
		path = f.raws["config"].s
	}
	if path != "" {
		if err := loadFile(&cfg, path); err != nil {
			errs = append(errs, err)
		}
		cfg.Config = path
	}
	v := reflect.ValueOf(&cfg).Elem()
	for _, fd := range Fields() {
		if fd.Flag == "config" {
			continue
		}
		if s, ok := lookupEnv(getenv, fd.Env); ok {
			if err := setField(v.FieldByIndex(fd.index), s); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", fd.Env, err))
			}
		}
		if set[fd.Flag] {
			if err := setField(v.FieldByIndex(fd.index), f.raws[fd.Flag].s); err != nil {
				errs = append(errs, fmt.Errorf("--%s: %w", fd.Flag, err))
			}
		}
	}
	if len(errs) == 0 {
		if err := cfg.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return cfg, errors.Join(errs...)
}

func lookupEnv(getenv func(string) string, name string) (string, bool) {
	s := getenv(name)
	return s, s != ""
}

func loadFile(cfg *Config, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("configuration file: %w", err)
	}
	if err := decodeYAML(cfg, b); err != nil {
		return fmt.Errorf("configuration file %s: %w", path, err)
	}
	return nil
}

// decodeYAML sets what the YAML document b names on cfg; unknown keys are
// errors.
func decodeYAML(cfg *Config, b []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) { // an empty file is an empty configuration
		return yamlProblem(err)
	}
	return nil
}

var (
	yamlUnknownKey = regexp.MustCompile(`(?s)^(line \d+): field (\S+) not found in type .*$`)
	yamlWrongType  = regexp.MustCompile(`(?s)^(line \d+): cannot unmarshal !!(\w+) (?:(.*) )?into (.*)$`)
)

// yamlProblem rewords the YAML decoder's errors for a person who wrote
// the file, not the Go types it is read into: "line 3: unknown key
// \"lgo_level\"" instead of "field lgo_level not found in type
// config.Config".
func yamlProblem(err error) error {
	te, ok := errors.AsType[*yaml.TypeError](err)
	if !ok {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		if g := yamlUnknownKey.FindStringSubmatch(m); g != nil {
			m = fmt.Sprintf("%s: unknown key %q", g[1], g[2])
		} else if g := yamlWrongType.FindStringSubmatch(m); g != nil {
			m = fmt.Sprintf("%s: %s is not %s", g[1], cmp.Or(g[3], "a "+yamlTags[g[2]]), yamlKind(g[4]))
		}
		msgs[i] = m
	}
	return errors.New(strings.Join(msgs, "; "))
}

// yamlTags names the YAML tags of values that come without their text.
var yamlTags = map[string]string{"seq": "list", "map": "mapping", "str": "string", "int": "number", "bool": "boolean", "float": "number"}

// yamlKind names the kind of value a Go type reads, for yamlProblem.
func yamlKind(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration like 30s or 5m"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	default:
		return "a mapping of keys"
	}
}

func setField(v reflect.Value, s string) error {
	switch {
	case v.Type() == reflect.TypeFor[time.Duration]():
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration like 30s or 5m", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int, v.Kind() == reflect.Int64, v.Kind() == reflect.Int32:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		v.SetInt(n)
	case v.Kind() == reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		v.SetFloat(f)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.String:
		var parts []string
		for p := range strings.SplitSeq(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		v.Set(reflect.ValueOf(parts))
	case v.Kind() == reflect.String:
		v.SetString(s)
	default:
		return fmt.Errorf("unsupported setting type %s", v.Type())
	}
	return nil
}

// Reference renders the configuration reference as a Markdown table.
func Reference() string {
	var b strings.Builder
	b.WriteString("| flag | environment | YAML key | type | default | meaning |\n|---|---|---|---|---|---|\n")
	def := reflect.ValueOf(Default())
	for _, f := range Fields() {
		d := fmt.Sprint(def.FieldByIndex(f.index).Interface())
		if d == "" || d == "[]" {
			d = "—"
		}
		y := f.YAML
		if y == "" {
			y = "—"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | `%s` | %s | `%s` | %s |\n", f.Flag, f.Env, y, f.Type, d, f.Usage)
	}
	return b.String()
}
