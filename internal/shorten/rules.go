package shorten

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Redirect rules: a link may carry an ordered list of rules; the first
// whose conditions all hold picks the target (its URL, or one arm of its
// weighted split), else the link's own URL. Rules are validated when they
// are written (ValidateRules), compiled once when the link is cached
// (compileRules) and evaluated on each redirect (RuleSet.choose), so a
// link without rules pays nothing.

// Bounds on a link's rules, so that a cached link stays small and one
// redirect's evaluation stays cheap.
const (
	MaxRules           = 20
	MaxSplitArms       = 10
	MaxConditionValues = 20
	MaxQueryConditions = 10
	MaxQueryLength     = 128 // bytes in one query condition's key or value
	MaxRuleNameLength  = 64
	MaxSplitWeight     = 10_000
	// MaxRulesBytes bounds a link's rules as stored (compact JSON).
	MaxRulesBytes = 32 << 10
)

// Rule is one redirect rule. Exactly one of URL and Split is set; If may
// be empty (the rule always matches, as a last rule before the default, or
// a split for every visitor).
type Rule struct {
	// Name labels the rule in clicks and errors; if empty, the rule is
	// "rules[i]" (i from 0).
	Name string     `json:"name,omitempty"`
	If   Conditions `json:"if,omitzero"`
	URL  string     `json:"url,omitempty"`
	// Split sends each visitor to one arm, with probability weight/total,
	// the same arm on every visit (see RuleSet).
	Split []Arm `json:"split,omitempty"`
}

// Conditions are what a rule asks of a visit; all that are set must hold,
// and a list holds when any of its values does.
type Conditions struct {
	// Device is the device class from the User-Agent: desktop, mobile,
	// tablet, tv or bot.
	Device []string `json:"device,omitempty"`
	// OS is the operating system from the User-Agent: android, ios,
	// macos, windows, linux, chromeos, freebsd or openbsd.
	OS []string `json:"os,omitempty"`
	// Language matches the visitor's preferred language (the first of
	// Accept-Language with the highest q): "de" matches de and de-CH;
	// "pt-BR" only pt-BR.
	Language []string `json:"language,omitempty"`
	// Country is an ISO 3166-1 alpha-2 code (FR, BE), City a city's
	// English name, both from the GeoIP database (links.geoip_db).
	Country []string `json:"country,omitempty"`
	City    []string `json:"city,omitempty"`
	// Query maps a query parameter to the value it must have; "*" means
	// any value, as long as the parameter is present.
	Query map[string]string `json:"query,omitempty"`
}

// Arm is one target of a split.
type Arm struct {
	// Name labels the arm in clicks; if empty, its index.
	Name   string `json:"name,omitempty"`
	URL    string `json:"url"`
	Weight int    `json:"weight"`
}

// DefaultTarget is the target recorded for a hit on a link with rules
// when none matched: the link's own URL.
const DefaultTarget = "default"

var (
	devices = map[string]uint8{"desktop": 1 << 0, "mobile": 1 << 1, "tablet": 1 << 2, "tv": 1 << 3, "bot": 1 << 4}
	systems = map[string]uint16{"android": 1 << 0, "ios": 1 << 1, "macos": 1 << 2, "windows": 1 << 3,
		"linux": 1 << 4, "chromeos": 1 << 5, "freebsd": 1 << 6, "openbsd": 1 << 7}
	ruleName    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	languageTag = regexp.MustCompile(`^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$`)
)

// errNoGeo is the reason given for a country or city condition on a
// server without a GeoIP database.
const errNoGeo = "needs a GeoIP database, and this server has none: set links.geoip_db to a GeoLite2 or DB-IP lite country or city file"

// ValidateRules checks rules as a link's rules: bounds, known device and
// OS names, well-formed languages, countries and query conditions, and
// every target accepted by targets. Geo conditions are refused when geo is
// false (no GeoIP database). Each problem is a field error naming the rule
// by index, with its name: "rules[2].if.country[0]".
func ValidateRules(rules []Rule, targets TargetPolicy, geo bool) []apperr.FieldError {
	var fields []apperr.FieldError
	bad := func(field, format string, args ...any) {
		fields = append(fields, apperr.FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	if len(rules) > MaxRules {
		bad("rules", "has %d rules; at most %d are accepted", len(rules), MaxRules)
		return fields
	}
	names := map[string]int{}
	for i, r := range rules {
		at := fmt.Sprintf("rules[%d]", i)
		bad := bad
		if r.Name != "" && len(r.Name) <= MaxRuleNameLength {
			// The field names the rule by index, the detail by name too.
			bad = func(field, format string, args ...any) {
				fields = append(fields, apperr.FieldError{Field: field, Detail: fmt.Sprintf("rule %q: ", r.Name) + fmt.Sprintf(format, args...)})
			}
		}
		if r.Name != "" {
			switch {
			case len(r.Name) > MaxRuleNameLength || !ruleName.MatchString(r.Name):
				bad(at+".name", "must be 1 to %d letters, digits, '.', '-' or '_', starting with a letter or digit", MaxRuleNameLength)
			case r.Name == DefaultTarget:
				bad(at+".name", "%q is kept for hits no rule matched", DefaultTarget)
			default:
				if j, dup := names[r.Name]; dup {
					bad(at+".name", "is also the name of rules[%d]", j)
				}
				names[r.Name] = i
			}
		}
		validateConditions(r.If, at+".if", geo, bad)
		switch {
		case r.URL != "" && len(r.Split) > 0:
			bad(at, "has both url and split; give one")
		case r.URL == "" && len(r.Split) == 0:
			bad(at, "needs a url or a split")
		case r.URL != "":
			if _, err := targets.ValidateTarget(r.URL); err != nil {
				bad(at+".url", "%s", err)
			}
		default:
			validateSplit(r.Split, at+".split", targets, bad)
		}
	}
	if len(fields) == 0 {
		if b, _ := json.Marshal(rules); len(b) > MaxRulesBytes {
			bad("rules", "take %d bytes; at most %d are accepted", len(b), MaxRulesBytes)
		}
	}
	return fields
}

func validateConditions(c Conditions, at string, geo bool, bad func(field, format string, args ...any)) {
	lists := []struct {
		name   string
		values []string
		valid  func(string) string // the reason a value is refused, or ""
	}{
		{"device", c.Device, func(v string) string { return known(v, devices) }},
		{"os", c.OS, func(v string) string { return known(v, systems) }},
		{"language", c.Language, func(v string) string {
			if len(v) > 35 || !languageTag.MatchString(v) {
				return "must be a language tag such as de or pt-BR"
			}
			return ""
		}},
		{"country", c.Country, func(v string) string {
			if len(v) != 2 || !isUpperAlpha(v) {
				return "must be an ISO 3166-1 alpha-2 code in capitals, such as FR"
			}
			return ""
		}},
		{"city", c.City, func(v string) string {
			if v == "" || len(v) > 100 {
				return "must be a city name of 1 to 100 bytes"
			}
			return ""
		}},
	}
	for _, l := range lists {
		if l.values == nil {
			continue
		}
		field := at + "." + l.name
		if (l.name == "country" || l.name == "city") && !geo {
			bad(field, errNoGeo)
			continue
		}
		if len(l.values) == 0 || len(l.values) > MaxConditionValues {
			bad(field, "must list 1 to %d values", MaxConditionValues)
			continue
		}
		for j, v := range l.values {
			if reason := l.valid(v); reason != "" {
				bad(fmt.Sprintf("%s[%d]", field, j), "%s", reason)
			}
		}
	}
	if c.Query != nil {
		if len(c.Query) == 0 || len(c.Query) > MaxQueryConditions {
			bad(at+".query", "must hold 1 to %d parameters", MaxQueryConditions)
		}
		for _, k := range slices.Sorted(maps.Keys(c.Query)) {
			v := c.Query[k]
			switch {
			case k == "" || len(k) > MaxQueryLength:
				bad(at+".query", "parameter names must be 1 to %d bytes", MaxQueryLength)
			case len(v) > MaxQueryLength:
				bad(at+".query."+k, "must be at most %d bytes", MaxQueryLength)
			}
		}
	}
}

func validateSplit(arms []Arm, at string, targets TargetPolicy, bad func(field, format string, args ...any)) {
	if len(arms) < 2 || len(arms) > MaxSplitArms {
		bad(at, "must have 2 to %d arms", MaxSplitArms)
		return
	}
	names := map[string]bool{}
	for j, a := range arms {
		arm := fmt.Sprintf("%s[%d]", at, j)
		if a.Weight < 1 || a.Weight > MaxSplitWeight {
			bad(arm+".weight", "must be from 1 to %d", MaxSplitWeight)
		}
		if _, err := targets.ValidateTarget(a.URL); err != nil {
			bad(arm+".url", "%s", err)
		}
		if a.Name != "" {
			if len(a.Name) > MaxRuleNameLength || !ruleName.MatchString(a.Name) {
				bad(arm+".name", "must be 1 to %d letters, digits, '.', '-' or '_', starting with a letter or digit", MaxRuleNameLength)
			} else if names[a.Name] {
				bad(arm+".name", "is the name of another arm")
			}
			names[a.Name] = true
		}
	}
}

func known[V any](v string, names map[string]V) string {
	if _, ok := names[v]; ok {
		return ""
	}
	return "must be one of " + strings.Join(slices.Sorted(maps.Keys(names)), ", ")
}

func isUpperAlpha(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// EncodeRules is rules as the store and the caches keep them: compact
// JSON, or "" for none.
func EncodeRules(rules []Rule) string {
	if len(rules) == 0 {
		return ""
	}
	b, err := json.Marshal(rules)
	if err != nil { // cannot happen: the types marshal
		return ""
	}
	return string(b)
}

// DecodeRules reads what EncodeRules wrote.
func DecodeRules(s string) ([]Rule, error) {
	if s == "" {
		return nil, nil
	}
	var rules []Rule
	if err := json.Unmarshal([]byte(s), &rules); err != nil {
		return nil, fmt.Errorf("decode link rules: %w", err)
	}
	return rules, nil
}
