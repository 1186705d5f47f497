package shorten

import (
	"net/netip"
	"strconv"
	"strings"
)

// Geo finds where a client address is, from a local database
// (geoip.DB). It must be safe for concurrent use and fast: it is asked on
// the redirect path, once per hit on a link with a country or city rule.
type Geo interface {
	// Locate returns the country (ISO 3166-1 alpha-2, upper case) and
	// the city (English name) of addr; "" for what it does not know.
	Locate(addr netip.Addr) (country, city string)
}

// Visit is what rules look at of a request to a short link.
type Visit struct {
	UserAgent      string
	AcceptLanguage string
	// RawQuery is the short URL's query string, without '?'.
	RawQuery string
	// Client is the client's IP address (behind trusted proxies, the one
	// they name), for geo conditions and the split's stickiness.
	Client string
}

// RuleSet is a link's rules compiled for the redirect path. It is
// immutable and safe for concurrent use; a nil *RuleSet is a link without
// rules.
//
// A split's arm is chosen by a hash of the link, the rule, the client
// address and the User-Agent: the same visitor gets the same arm on every
// visit and on every node, with no cookie and nothing stored; a visitor
// whose address changes (a phone between networks) may change arm.
type RuleSet struct {
	linkID int64
	rules  []compiledRule
	src    []Rule
}

type compiledRule struct {
	label     string
	device    uint8  // bit set of devices; 0: any
	os        uint16 // bit set of systems; 0: any
	languages []string
	countries []string
	cities    []string
	query     [][2]string
	url       string
	arms      []compiledArm
	total     uint64 // the arms' weights added up
}

type compiledArm struct {
	label string
	url   string
	upTo  uint64 // the weights of this arm and those before it
}

// compileRules compiles a link's rules, or returns nil for none. Rules are
// validated when written; compiling does not fail, so a condition this
// server cannot judge (a country without a GeoIP database) never holds.
func compileRules(linkID int64, rules []Rule) *RuleSet {
	if len(rules) == 0 {
		return nil
	}
	rs := &RuleSet{linkID: linkID, rules: make([]compiledRule, len(rules)), src: rules}
	for i, r := range rules {
		c := &rs.rules[i]
		c.label = r.Name
		if c.label == "" {
			c.label = "rules[" + strconv.Itoa(i) + "]"
		}
		for _, d := range r.If.Device {
			c.device |= devices[d]
		}
		for _, o := range r.If.OS {
			c.os |= systems[o]
		}
		c.languages = r.If.Language
		c.countries = r.If.Country
		c.cities = r.If.City
		for k, v := range r.If.Query {
			c.query = append(c.query, [2]string{k, v})
		}
		c.url = r.URL
		for j, a := range r.Split {
			c.total += uint64(max(a.Weight, 0))
			label := a.Name
			if label == "" {
				label = strconv.Itoa(j)
			}
			c.arms = append(c.arms, compiledArm{label: c.label + "/" + label, url: a.URL, upTo: c.total})
		}
	}
	return rs
}

// Rules returns the rules as written. The slice must not be changed.
func (rs *RuleSet) Rules() []Rule {
	if rs == nil {
		return nil
	}
	return rs.src
}

// visit is a Visit with what the rules asked of it so far, each part
// worked out once, on first use.
type visit struct {
	Visit
	geo                              Geo
	uaDone, botDone, langDone, geoDn bool
	device                           uint8
	os                               uint16
	lang, country, city              string
}

// choose returns the URL and the label of the first rule v matches, or
// ("", DefaultTarget) when none does.
func (rs *RuleSet) choose(v Visit, geo Geo) (url, label string) {
	st := visit{Visit: v, geo: geo}
	for i := range rs.rules {
		r := &rs.rules[i]
		if !st.matches(r) {
			continue
		}
		if r.arms == nil {
			return r.url, r.label
		}
		a := r.pick(rs.linkID, i, v.Client, v.UserAgent)
		return a.url, a.label
	}
	return "", DefaultTarget
}

func (st *visit) matches(r *compiledRule) bool {
	if r.device != 0 || r.os != 0 {
		if !st.uaDone {
			st.device, st.os = parseUserAgent(st.UserAgent)
			st.uaDone = true
		}
		if r.device&botBit != 0 && st.device != botBit && !st.botDone {
			if bot, _ := ClassifyHit(false, st.UserAgent, ""); bot {
				st.device = botBit
			}
			st.botDone = true
		}
		if r.device != 0 && r.device&st.device == 0 || r.os != 0 && r.os&st.os == 0 {
			return false
		}
	}
	if r.languages != nil {
		if !st.langDone {
			st.lang = preferredLanguage(st.AcceptLanguage)
			st.langDone = true
		}
		if !anyLanguage(r.languages, st.lang) {
			return false
		}
	}
	if r.countries != nil || r.cities != nil {
		if !st.geoDn {
			if addr, err := netip.ParseAddr(st.Client); err == nil && st.geo != nil {
				st.country, st.city = st.geo.Locate(addr.Unmap())
			}
			st.geoDn = true
		}
		if r.countries != nil && !anyFold(r.countries, st.country) || r.cities != nil && !anyFold(r.cities, st.city) {
			return false
		}
	}
	for _, kv := range r.query {
		v, ok := queryValue(st.RawQuery, kv[0])
		if !ok || kv[1] != "*" && v != kv[1] {
			return false
		}
	}
	return true
}

// pick is the split's arm for a visitor: FNV-1a over the link id, the
// rule's index, the client and the User-Agent, reduced to the weights.
func (r *compiledRule) pick(linkID int64, rule int, client, ua string) *compiledArm {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := range 8 {
		h = (h ^ uint64(byte(linkID>>(8*i)))) * prime
	}
	h = (h ^ uint64(rule)) * prime
	for i := 0; i < len(client); i++ {
		h = (h ^ uint64(client[i])) * prime
	}
	h *= prime // a zero byte between the two
	for i := 0; i < len(ua); i++ {
		h = (h ^ uint64(ua[i])) * prime
	}
	// FNV's low bits mix poorly for short inputs that differ at the end:
	// fold the high half in before reducing.
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	n := h % r.total
	for i := range r.arms {
		if n < r.arms[i].upTo {
			return &r.arms[i]
		}
	}
	return &r.arms[len(r.arms)-1]
}

func anyFold(values []string, s string) bool {
	if s == "" {
		return false
	}
	for _, v := range values {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// anyLanguage reports whether tag is one of ranges or falls under one
// ("de" covers "de-CH").
func anyLanguage(ranges []string, tag string) bool {
	if tag == "" {
		return false
	}
	for _, r := range ranges {
		if len(tag) >= len(r) && strings.EqualFold(tag[:len(r)], r) && (len(tag) == len(r) || tag[len(r)] == '-') {
			return true
		}
	}
	return false
}

// preferredLanguage is the language tag of Accept-Language with the
// highest q (the first of those at a tie), ignoring "*" and q=0; "" if
// none. It allocates nothing.
func preferredLanguage(h string) string {
	best, bestQ := "", -1
	for h != "" {
		var item string
		item, h, _ = strings.Cut(h, ",")
		tag, params, _ := strings.Cut(item, ";")
		tag = strings.TrimSpace(tag)
		if tag == "" || tag == "*" {
			continue
		}
		q := 1000
		if params != "" {
			q = parseQ(params)
		}
		if q > bestQ && q > 0 {
			best, bestQ = tag, q
		}
	}
	return best
}

// parseQ reads "q=0.8" as 800 (thousandths); a malformed weight is 0.
func parseQ(params string) int {
	p := strings.TrimSpace(params)
	v, ok := strings.CutPrefix(p, "q=")
	if !ok {
		v, ok = strings.CutPrefix(p, "Q=")
	}
	if !ok || v == "" {
		return 0
	}
	if v[0] == '1' {
		return 1000
	}
	if v[0] != '0' {
		return 0
	}
	q, scale := 0, 100
	if len(v) > 1 && v[1] == '.' {
		for i := 2; i < len(v) && i < 5; i++ {
			if v[i] < '0' || v[i] > '9' {
				return 0
			}
			q += int(v[i]-'0') * scale
			scale /= 10
		}
	}
	return q
}

// queryValue finds key's first value in a raw query string, decoding only
// the pairs that need it.
func queryValue(raw, key string) (string, bool) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			k = unescapeQuery(k)
		}
		if k != key {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			v = unescapeQuery(v)
		}
		return v, true
	}
	return "", false
}
