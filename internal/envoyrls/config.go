package envoyrls

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice/ratelimit"
)

// ErrInvalidConfig wraps every problem found in a rate limit configuration.
var ErrInvalidConfig = errors.New("invalid envoy rate limit config")

// Config is a validated set of rate limit domains. It is immutable once
// loaded and safe for concurrent use. The zero Config has no domains: every
// descriptor is answered OK with no limit.
type Config struct {
	domains map[string]*domain
	files   []string
}

// domain is one file's tree of descriptors.
type domain struct {
	name string
	file string
	root node
}

// node is one level of a descriptor tree.
type node struct {
	exact     map[entryKey]*node
	wildcards []wildcard // in file order: the first matching prefix wins
	bare      map[string]*node
	rule      *rule
}

type entryKey struct{ key, value string }

type wildcard struct {
	key, prefix string
	node        *node
}

// rule is one rate_limit block, ready to check.
type rule struct {
	path      string // domain.key_value.key, envoyproxy/ratelimit's stats key
	name      string // rate_limit.name; the rule's path when empty
	unit      rlspb.RateLimitResponse_RateLimit_Unit
	rpu       uint32 // requests_per_unit
	mult      uint32 // unit multiplier: 1 except for overrides
	unlimited bool
	shadow    bool
	detailed  bool
	always    bool          // charge: always (usage.go)
	syncEvery time.Duration // sync: local, its interval; 0 when every check goes to the store (localsync.go)
	replaces  []string
	policy    ratelimit.Policy // zero when unlimited or rpu is 0
	limit     *rlspb.RateLimitResponse_RateLimit

	// Header parts that do not change between requests.
	hdrName, hdrPolicy, hdrLimit string
}

// units are the periods of rate_limit.unit. A month is 30 days and a year
// 365, as in envoyproxy/ratelimit.
var units = map[rlspb.RateLimitResponse_RateLimit_Unit]time.Duration{
	rlspb.RateLimitResponse_RateLimit_SECOND: time.Second,
	rlspb.RateLimitResponse_RateLimit_MINUTE: time.Minute,
	rlspb.RateLimitResponse_RateLimit_HOUR:   time.Hour,
	rlspb.RateLimitResponse_RateLimit_DAY:    24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_WEEK:   7 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_MONTH:  30 * 24 * time.Hour,
	rlspb.RateLimitResponse_RateLimit_YEAR:   365 * 24 * time.Hour,
}

// period is the length of r's window.
func (r *rule) period() time.Duration { return units[r.unit] * time.Duration(r.mult) }

// newRule builds a rule and its policy. name is the rate_limit's name.
func newRule(path, name string, unit rlspb.RateLimitResponse_RateLimit_Unit, mult, rpu uint32, alg ratelimit.Algorithm, burst int64) (*rule, error) {
	r := &rule{path: path, name: cmp.Or(name, path), unit: unit, rpu: rpu, mult: mult}
	r.limit = &rlspb.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: rpu, Unit: unit}
	if mult > 1 {
		r.limit.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	r.hdrName = sfString(r.name)
	r.hdrLimit = strconv.FormatUint(uint64(rpu), 10)
	r.hdrPolicy = r.hdrName + ";q=" + r.hdrLimit + ";w=" + strconv.FormatInt(int64(r.period()/time.Second), 10)
	if rpu == 0 {
		return r, nil
	}
	if burst == 0 {
		burst = int64(rpu)
	}
	r.policy = ratelimit.Policy{Algorithm: alg, Limit: int64(rpu), Period: r.period()}
	if alg == ratelimit.TokenBucket || alg == ratelimit.GCRA {
		r.policy.Burst = burst
	}
	r.policy.Name = fmt.Sprintf(PolicyPrefix+"%s:%s:%d/%s*%d:%d", escapeName(path), alg, rpu,
		strings.ToLower(unit.String()), mult, r.policy.Burst)
	if err := r.policy.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// escapeName keeps a policy name free of the braces stores reserve.
func escapeName(s string) string {
	if !strings.ContainsAny(s, "{}%") {
		return s
	}
	return strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D").Replace(s)
}

// Load reads path: one YAML file, or every .yaml and .yml file directly in
// a folder (names starting with a dot are skipped, so Kubernetes ConfigMap
// mounts work). Each file holds one domain. Errors name the file and wrap
// ErrInvalidConfig; an empty folder is a valid Config with no domains.
func Load(path string) (*Config, error) {
	files, err := configFiles(path)
	if err != nil {
		return nil, err
	}
	c := &Config{domains: map[string]*domain{}}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("envoy config: %w", err)
		}
		if err := c.add(f, data); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Parse builds a Config from the contents of YAML files, each named by its
// key in files (used in errors), added in the order of their names.
func Parse(files map[string][]byte) (*Config, error) {
	c := &Config{domains: map[string]*domain{}}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := c.add(n, files[n]); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// add parses one file into c.
func (c *Config) add(file string, data []byte) error {
	d, err := parseDomain(file, data)
	if err != nil {
		return err
	}
	if prev, ok := c.domains[d.name]; ok {
		return fmt.Errorf("%w: %s: duplicate domain %q (already in %s)", ErrInvalidConfig, file, d.name, prev.file)
	}
	c.domains[d.name] = d
	c.files = append(c.files, file)
	return nil
}

// configFiles lists the files Load reads from path, sorted.
func configFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("envoy config: %w", err)
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("envoy config: %w", err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if strings.HasPrefix(name, ".") || (ext != ".yaml" && ext != ".yml") {
			continue
		}
		full := filepath.Join(path, name)
		if fi, err := os.Stat(full); err != nil || fi.IsDir() {
			continue // a dangling link or a folder named like a file
		}
		files = append(files, full)
	}
	return files, nil
}

// Domains lists the configured domains, sorted.
func (c *Config) Domains() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.domains))
	for n := range c.domains {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Files lists the files the Config was loaded from, in load order.
func (c *Config) Files() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.files)
}

// Dump describes every rule, one line each, sorted: for logs and tests.
func (c *Config) Dump() string {
	if c == nil {
		return ""
	}
	var lines []string
	for _, d := range c.domains {
		d.root.dump(&lines)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

func (n *node) dump(lines *[]string) {
	if r := n.rule; r != nil {
		var b strings.Builder
		b.WriteString(r.path + ":")
		switch {
		case r.unlimited:
			b.WriteString(" unlimited")
		case r.rpu == 0:
			fmt.Fprintf(&b, " refuse all (0 per %s)", strings.ToLower(r.unit.String()))
		default:
			fmt.Fprintf(&b, " %s %d per %s", r.policy.Algorithm, r.rpu, strings.ToLower(r.unit.String()))
			if r.policy.Burst != 0 {
				fmt.Fprintf(&b, " burst %d", r.policy.Burst)
			}
		}
		if r.limit.Name != "" {
			fmt.Fprintf(&b, " name=%q", r.limit.Name)
		}
		if len(r.replaces) > 0 {
			fmt.Fprintf(&b, " replaces=%q", r.replaces)
		}
		if r.shadow {
			b.WriteString(" shadow")
		}
		if r.detailed {
			b.WriteString(" detailed")
		}
		*lines = append(*lines, b.String())
	}
	for _, m := range n.exact {
		m.dump(lines)
	}
	for _, w := range n.wildcards {
		w.node.dump(lines)
	}
	for _, m := range n.bare {
		m.dump(lines)
	}
}
