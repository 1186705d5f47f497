package envoyrls

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/ratelimit"
)

// nodeBudget is how many YAML nodes a file of n bytes may expand to: a
// file without aliases has fewer nodes than bytes, so this leaves room for
// anchors reused a good many times while a small file cannot blow up into
// an unbounded tree through aliases of aliases.
func nodeBudget(n int) int { return 4*n + 4096 }

// The keys each YAML mapping may hold; anything else is an error, as in
// envoyproxy/ratelimit (plus Sluice's algorithm and burst).
var (
	rootKeys       = []string{"domain", "descriptors"}
	descriptorKeys = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "detailed_metric"}
	rateLimitKeys  = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "burst", "charge", "sync", "sync_interval"}
	replacesKeys   = []string{"name"}
)

// algorithms are the rate_limit.algorithm values: every algorithm that
// limits a rate (concurrency does not).
var algorithms = []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.TokenBucket, ratelimit.GCRA,
	ratelimit.SlidingWindowLog, ratelimit.SlidingWindowCounter}

// parser reads one file.
type parser struct {
	file     string
	size     int
	nodes    int
	maxNodes int
}

// configError is a problem at node n, under path inside the file.
func (p *parser) errorf(n *yaml.Node, path, format string, args ...any) error {
	where := p.file
	if n != nil && n.Line > 0 {
		where += ":" + strconv.Itoa(n.Line)
	}
	if path != "" {
		where += ": " + path
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, where, fmt.Sprintf(format, args...))
}

// parseDomain parses one file holding one domain.
func parseDomain(file string, data []byte) (*domain, error) {
	p := &parser{file: file, size: len(data), maxNodes: nodeBudget(len(data))}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, p.errorf(nil, "", "%v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, p.errorf(&extra, "", "one YAML document (one domain) per file")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	fields, err := p.mapping(root, "", rootKeys)
	if err != nil {
		return nil, err
	}
	d := &domain{file: file}
	if d.name, err = p.str(fields["domain"], "domain"); err != nil {
		return nil, err
	}
	if d.name == "" {
		return nil, p.errorf(root, "domain", "config file cannot have an empty domain")
	}
	if err := p.descriptors(&d.root, fields["descriptors"], "descriptors", d.name); err != nil {
		return nil, err
	}
	return d, nil
}

// descriptors parses a list of descriptors into the children of parent.
func (p *parser) descriptors(parent *node, list *yaml.Node, path, rulePath string) error {
	items, err := p.sequence(list, path)
	if err != nil {
		return err
	}
	for i, item := range items {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		f, err := p.mapping(item, ipath, descriptorKeys)
		if err != nil {
			return err
		}
		key, err := p.str(f["key"], ipath+".key")
		if err != nil {
			return err
		}
		if key == "" {
			return p.errorf(item, ipath, "descriptor has an empty key")
		}
		value, err := p.str(f["value"], ipath+".value")
		if err != nil {
			return err
		}
		composite := key
		if value != "" {
			composite += "_" + value
		}
		childPath := rulePath + "." + composite
		if parent.has(key, value) {
			return p.errorf(item, ipath, "duplicate descriptor composite key %q", childPath)
		}
		child := &node{}
		shadow, err := p.boolean(f["shadow_mode"], ipath+".shadow_mode")
		if err != nil {
			return err
		}
		detailed, err := p.boolean(f["detailed_metric"], ipath+".detailed_metric")
		if err != nil {
			return err
		}
		if rl := f["rate_limit"]; rl != nil && rl.Tag != "!!null" {
			if child.rule, err = p.rateLimit(rl, ipath+".rate_limit", childPath); err != nil {
				return err
			}
			child.rule.shadow, child.rule.detailed = shadow, detailed
		}
		if err := p.descriptors(child, f["descriptors"], ipath+".descriptors", childPath); err != nil {
			return err
		}
		parent.put(key, value, child)
	}
	return nil
}

// has reports whether n already has a child for key and value.
func (n *node) has(key, value string) bool {
	switch {
	case value == "":
		return n.bare[key] != nil
	case strings.HasSuffix(value, "*"):
		return slices.ContainsFunc(n.wildcards, func(w wildcard) bool { return w.key == key && w.prefix+"*" == value })
	}
	return n.exact[entryKey{key, value}] != nil
}

// put adds child under key and value: a bare key, a wildcard (a value
// ending in "*") or an exact value.
func (n *node) put(key, value string, child *node) {
	switch {
	case value == "":
		if n.bare == nil {
			n.bare = map[string]*node{}
		}
		n.bare[key] = child
	case strings.HasSuffix(value, "*"):
		n.wildcards = append(n.wildcards, wildcard{key: key, prefix: strings.TrimSuffix(value, "*"), node: child})
	default:
		if n.exact == nil {
			n.exact = map[entryKey]*node{}
		}
		n.exact[entryKey{key, value}] = child
	}
}

// rateLimit parses a rate_limit block.
func (p *parser) rateLimit(rl *yaml.Node, path, rulePath string) (*rule, error) {
	f, err := p.mapping(rl, path, rateLimitKeys)
	if err != nil {
		return nil, err
	}
	unlimited, err := p.boolean(f["unlimited"], path+".unlimited")
	if err != nil {
		return nil, err
	}
	name, err := p.str(f["name"], path+".name")
	if err != nil {
		return nil, err
	}
	unitName, err := p.str(f["unit"], path+".unit")
	if err != nil {
		return nil, err
	}
	var rpu uint32
	if n := f["requests_per_unit"]; n != nil && n.Tag != "!!null" {
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&rpu) != nil {
			return nil, p.errorf(n, path+".requests_per_unit", "must be a whole number from 0 to %d, not %q", uint32(1<<32-1), n.Value)
		}
	}
	algName, err := p.str(f["algorithm"], path+".algorithm")
	if err != nil {
		return nil, err
	}
	var burst int64
	bn := f["burst"]
	if bn != nil && bn.Tag != "!!null" {
		if bn.Kind != yaml.ScalarNode || bn.Tag != "!!int" || bn.Decode(&burst) != nil || burst < 1 {
			return nil, p.errorf(bn, path+".burst", "must be a whole number of at least 1, not %q", bn.Value)
		}
	}
	replaces, err := p.replaces(f["replaces"], path+".replaces", name)
	if err != nil {
		return nil, err
	}
	charge, err := p.str(f["charge"], path+".charge")
	if err != nil {
		return nil, err
	}
	if charge != "" && charge != "always" {
		return nil, p.errorf(f["charge"], path+".charge", "must be always, not %q", charge)
	}
	syncEvery, err := p.sync(f, path)
	if err != nil {
		return nil, err
	}
	if unlimited {
		for _, k := range []string{"unit", "algorithm", "burst", "charge", "sync", "sync_interval"} {
			if n := f[k]; n != nil && n.Tag != "!!null" {
				return nil, p.errorf(n, path+"."+k, "should not be set when unlimited")
			}
		}
		return &rule{path: rulePath, name: cmp.Or(name, rulePath), unlimited: true, replaces: replaces,
			limit: &rlspb.RateLimitResponse_RateLimit{Name: name}}, nil
	}
	unit := rlspb.RateLimitResponse_RateLimit_Unit(rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unitName)])
	if _, ok := units[unit]; !ok {
		return nil, p.errorf(orNode(f["unit"], rl), path+".unit", "invalid rate limit unit %q (want second, minute, hour, day, week, month or year)", unitName)
	}
	alg := ratelimit.FixedWindow
	if algName != "" {
		alg = ratelimit.Algorithm(algName)
		if !slices.Contains(algorithms, alg) {
			return nil, p.errorf(f["algorithm"], path+".algorithm", "unknown algorithm %q (want fixed_window, token_bucket, gcra, sliding_window_log or sliding_window_counter)", algName)
		}
	}
	if burst != 0 && alg != ratelimit.TokenBucket && alg != ratelimit.GCRA {
		return nil, p.errorf(bn, path+".burst", "only token_bucket and gcra take a burst, not %s", alg)
	}
	if burst != 0 && rpu == 0 {
		return nil, p.errorf(bn, path+".burst", "a burst needs requests_per_unit above 0")
	}
	r, err := newRule(rulePath, name, unit, 1, rpu, alg, burst)
	if err != nil {
		return nil, p.errorf(rl, path, "%v", err)
	}
	r.replaces = replaces
	if charge == "always" && rpu == 0 {
		return nil, p.errorf(f["charge"], path+".charge", "charge: always needs requests_per_unit above 0")
	}
	r.always = charge == "always"
	if syncEvery != 0 && rpu == 0 {
		return nil, p.errorf(f["sync"], path+".sync", "sync: local needs requests_per_unit above 0")
	}
	r.syncEvery = syncEvery
	return r, nil
}

// replaces parses a replaces list of {name} entries.
func (p *parser) replaces(list *yaml.Node, path, own string) ([]string, error) {
	items, err := p.sequence(list, path)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, item := range items {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		f, err := p.mapping(item, ipath, replacesKeys)
		if err != nil {
			return nil, err
		}
		name, err := p.str(f["name"], ipath+".name")
		if err != nil {
			return nil, err
		}
		if name == "" {
			return nil, p.errorf(item, ipath, "should not have an empty replaces entry")
		}
		if name == own {
			return nil, p.errorf(item, ipath, "replaces should not contain the name of its own rule %q", own)
		}
		out = append(out, name)
	}
	return out, nil
}

func orNode(a, b *yaml.Node) *yaml.Node {
	if a != nil {
		return a
	}
	return b
}

// resolve follows aliases and counts nodes against maxNodes.
func (p *parser) resolve(n *yaml.Node, path string) (*yaml.Node, error) {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	p.nodes++
	if p.nodes > p.maxNodes {
		return nil, p.errorf(n, path, "more than %d YAML nodes for %d bytes (aliases expanding?)", p.maxNodes, p.size)
	}
	return n, nil
}

// mapping returns n's fields, rejecting unknown and duplicate keys. A null
// or missing node is an empty mapping.
func (p *parser) mapping(n *yaml.Node, path string, known []string) (map[string]*yaml.Node, error) {
	n, err := p.resolve(n, path)
	if err != nil || n == nil || n.Kind == 0 || n.Tag == "!!null" || (n.Kind == yaml.DocumentNode && len(n.Content) == 0) {
		return map[string]*yaml.Node{}, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errorf(n, path, "must be a mapping, not %s", kindName(n))
	}
	fields := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		at := strings.TrimPrefix(path+"."+k.Value, ".")
		if k.Kind != yaml.ScalarNode || !slices.Contains(known, k.Value) {
			return nil, p.errorf(k, path, "unknown key %q", k.Value)
		}
		if _, dup := fields[k.Value]; dup {
			return nil, p.errorf(k, at, "duplicate key")
		}
		if v, err = p.resolve(v, at); err != nil {
			return nil, err
		}
		fields[k.Value] = v
	}
	return fields, nil
}

// sequence returns n's items; null or missing is empty.
func (p *parser) sequence(n *yaml.Node, path string) ([]*yaml.Node, error) {
	if n == nil || n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, p.errorf(n, path, "must be a list, not %s", kindName(n))
	}
	return n.Content, nil
}

// str reads a scalar as a string, as envoyproxy/ratelimit's YAML decoder
// does (value: 42 is "42"); null or missing is "".
func (p *parser) str(n *yaml.Node, path string) (string, error) {
	if n == nil || n.Tag == "!!null" {
		return "", nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", p.errorf(n, path, "must be a string, not %s", kindName(n))
	}
	return n.Value, nil
}

// boolean reads true or false; null or missing is false.
func (p *parser) boolean(n *yaml.Node, path string) (bool, error) {
	if n == nil || n.Tag == "!!null" {
		return false, nil
	}
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		return false, p.errorf(n, path, "must be true or false, not %q", n.Value)
	}
	return b, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "empty"
}
