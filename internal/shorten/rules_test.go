package shorten

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

const (
	iphoneUA     = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
	androidUA    = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36"
	ipadUA       = "Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
	androidTabUA = "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	windowsUA    = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	macUA        = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15"
	slackUA      = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
)

// mapGeo is a Geo from a table.
type mapGeo map[string][2]string

func (g mapGeo) Locate(addr netip.Addr) (string, string) {
	l := g[addr.String()]
	return l[0], l[1]
}

// addrGeo is a Geo from a table by address, allocating nothing.
type addrGeo map[netip.Addr]string

func (g addrGeo) Locate(addr netip.Addr) (string, string) { return g[addr], "" }

func TestValidateRules(t *testing.T) {
	t.Parallel()
	targets := TargetPolicy{OwnHosts: []string{"sho.rt"}}
	good := []Rule{
		{Name: "ios", If: Conditions{OS: []string{"ios"}}, URL: "https://apps.example.com/app"},
		{If: Conditions{Device: []string{"mobile", "tablet"}, Language: []string{"de", "pt-BR"}}, URL: "https://example.de/"},
		{If: Conditions{Country: []string{"FR", "BE"}, City: []string{"Paris"}}, URL: "https://example.fr/"},
		{If: Conditions{Query: map[string]string{"utm_source": "x", "ref": "*"}}, URL: "https://example.com/x"},
		{Name: "ab", Split: []Arm{{Name: "a", URL: "https://example.com/a", Weight: 70}, {URL: "https://example.com/b", Weight: 30}}},
	}
	if fields := ValidateRules(good, targets, true); fields != nil {
		t.Errorf("ValidateRules(good) = %v, want none", fields)
	}
	many := make([]Rule, MaxRules+1)
	for i := range many {
		many[i] = Rule{URL: "https://example.com/"}
	}
	long := strings.Repeat("x", MaxQueryLength+1)
	tests := []struct {
		name   string
		rules  []Rule
		geo    bool
		field  string
		detail string // a part of the detail
	}{
		{"too many", many, true, "rules", "at most 20"},
		{"no target", []Rule{{If: Conditions{OS: []string{"ios"}}}}, true, "rules[0]", "needs a url or a split"},
		{"both targets", []Rule{{URL: "https://example.com/", Split: good[4].Split}}, true, "rules[0]", "both"},
		{"private target", []Rule{good[0], {URL: "http://127.0.0.1/"}}, true, "rules[1].url", "private"},
		{"own host", []Rule{{Name: "loop", URL: "https://sho.rt/abc"}}, true, "rules[0].url", `rule "loop": points at this service`},
		{"unknown os", []Rule{{Name: "x", If: Conditions{OS: []string{"ios", "symbian"}}, URL: "https://example.com/"}}, true, "rules[0].if.os[1]", "must be one of android, chromeos"},
		{"unknown device", []Rule{{If: Conditions{Device: []string{"phone"}}, URL: "https://example.com/"}}, true, "rules[0].if.device[0]", "desktop"},
		{"bad language", []Rule{{If: Conditions{Language: []string{"german!"}}, URL: "https://example.com/"}}, true, "rules[0].if.language[0]", "language tag"},
		{"lower-case country", []Rule{{If: Conditions{Country: []string{"fr"}}, URL: "https://example.com/"}}, true, "rules[0].if.country[0]", "alpha-2"},
		{"country without geo", []Rule{good[0], good[2]}, false, "rules[1].if.country", "links.geoip_db"},
		{"city without geo", []Rule{{If: Conditions{City: []string{"Paris"}}, URL: "https://example.com/"}}, false, "rules[0].if.city", "GeoIP"},
		{"empty list", []Rule{{If: Conditions{OS: []string{}}, URL: "https://example.com/"}}, true, "rules[0].if.os", "1 to 20"},
		{"long query value", []Rule{{If: Conditions{Query: map[string]string{"a": long}}, URL: "https://example.com/"}}, true, "rules[0].if.query.a", "at most 128"},
		{"one arm", []Rule{{Split: good[4].Split[:1]}}, true, "rules[0].split", "2 to 10 arms"},
		{"zero weight", []Rule{{Split: []Arm{{URL: "https://example.com/a"}, {URL: "https://example.com/b", Weight: 1}}}}, true, "rules[0].split[0].weight", "from 1"},
		{"bad arm url", []Rule{{Split: []Arm{{URL: "ftp://example.com/a", Weight: 1}, {URL: "https://example.com/b", Weight: 1}}}}, true, "rules[0].split[0].url", "scheme"},
		{"duplicate names", []Rule{good[0], {Name: "ios", URL: "https://example.com/"}}, true, "rules[1].name", "rules[0]"},
		{"reserved name", []Rule{{Name: "default", URL: "https://example.com/"}}, true, "rules[0].name", "kept"},
		{"bad name", []Rule{{Name: "a b", URL: "https://example.com/"}}, true, "rules[0].name", "letters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fields := ValidateRules(tt.rules, targets, tt.geo)
			for _, f := range fields {
				if f.Field == tt.field && strings.Contains(f.Detail, tt.detail) {
					return
				}
			}
			t.Errorf("ValidateRules = %v; want a field error on %s saying %q", fields, tt.field, tt.detail)
		})
	}
}

func TestChoose(t *testing.T) {
	t.Parallel()
	rules := []Rule{
		{Name: "ios", If: Conditions{OS: []string{"ios"}}, URL: "https://apps.apple.com/x"},
		{If: Conditions{Device: []string{"mobile"}, Language: []string{"de"}}, URL: "https://example.de/mobile"},
		{Name: "fr", If: Conditions{Country: []string{"FR", "BE"}}, URL: "https://example.fr/"},
		{Name: "paris", If: Conditions{City: []string{"paris"}}, URL: "https://example.com/paris"},
		{Name: "utm", If: Conditions{Query: map[string]string{"utm_source": "news letter"}}, URL: "https://example.com/news"},
		{Name: "ref", If: Conditions{Query: map[string]string{"ref": "*"}}, URL: "https://example.com/ref"},
		{Name: "bots", If: Conditions{Device: []string{"bot"}}, URL: "https://example.com/bot"},
		{Name: "tablet", If: Conditions{Device: []string{"tablet"}}, URL: "https://example.com/tablet"},
		{Name: "win", If: Conditions{OS: []string{"windows"}, Device: []string{"desktop"}}, URL: "https://example.com/win"},
	}
	geo := mapGeo{"192.0.2.1": {"FR", "Lyon"}, "192.0.2.2": {"US", "Paris"}, "2001:db8::1": {"BE", ""}}
	rs := compileRules(42, rules)
	tests := []struct {
		name      string
		v         Visit
		url, rule string
	}{
		{"ios first", Visit{UserAgent: iphoneUA, AcceptLanguage: "de", Client: "192.0.2.1"}, "https://apps.apple.com/x", "ios"},
		{"german android", Visit{UserAgent: androidUA, AcceptLanguage: "de-CH,de;q=0.9,en;q=0.8"}, "https://example.de/mobile", "rules[1]"},
		{"english preferred over german", Visit{UserAgent: androidUA, AcceptLanguage: "en-US,en;q=0.9,de;q=0.8"}, "", DefaultTarget},
		{"german by weight", Visit{UserAgent: androidUA, AcceptLanguage: "en;q=0.5, de;q=0.7"}, "https://example.de/mobile", "rules[1]"},
		{"country", Visit{UserAgent: macUA, Client: "192.0.2.1"}, "https://example.fr/", "fr"},
		{"mapped v4 country", Visit{UserAgent: macUA, Client: "::ffff:192.0.2.1"}, "https://example.fr/", "fr"},
		{"v6 country", Visit{UserAgent: macUA, Client: "2001:db8::1"}, "https://example.fr/", "fr"},
		{"city", Visit{UserAgent: macUA, Client: "192.0.2.2"}, "https://example.com/paris", "paris"},
		{"query decoded", Visit{UserAgent: macUA, RawQuery: "a=1&utm_source=news+letter"}, "https://example.com/news", "utm"},
		{"query other value", Visit{UserAgent: macUA, RawQuery: "utm_source=ads"}, "", DefaultTarget},
		{"query present", Visit{UserAgent: macUA, RawQuery: "ref="}, "https://example.com/ref", "ref"},
		{"preview bot", Visit{UserAgent: slackUA}, "https://example.com/bot", "bots"},
		{"no agent is a bot", Visit{}, "https://example.com/bot", "bots"},
		{"ipad is ios", Visit{UserAgent: ipadUA}, "https://apps.apple.com/x", "ios"},
		{"tablet", Visit{UserAgent: androidTabUA, AcceptLanguage: "de"}, "https://example.com/tablet", "tablet"},
		{"windows desktop", Visit{UserAgent: windowsUA, Client: "not an address"}, "https://example.com/win", "win"},
		{"nothing matches", Visit{UserAgent: macUA, Client: "198.51.100.7"}, "", DefaultTarget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url, rule := rs.choose(tt.v, geo)
			if url != tt.url || rule != tt.rule {
				t.Errorf("choose(%+v) = %q, %q; want %q, %q", tt.v, url, rule, tt.url, tt.rule)
			}
		})
	}
	// Without a GeoIP database (removed after the rules were written),
	// geo conditions never hold.
	if url, rule := rs.choose(Visit{UserAgent: macUA, Client: "192.0.2.1"}, nil); rule != DefaultTarget {
		t.Errorf("choose without geo = %q, %q; want the default", url, rule)
	}
}

// TestSplit sends a fixed crowd of 20,000 visitors through a 70/20/10
// split: each arm's share is within 1.5 points of its weight (about five
// standard deviations for the 10% arm), every visitor gets the same arm on
// every visit and from another compilation of the rules (another node),
// and another link's split is independent of this one.
func TestSplit(t *testing.T) {
	t.Parallel()
	rules := []Rule{{Name: "ab", Split: []Arm{
		{Name: "a", URL: "https://example.com/a", Weight: 70},
		{Name: "b", URL: "https://example.com/b", Weight: 20},
		{URL: "https://example.com/c", Weight: 10},
	}}}
	rs, again, other := compileRules(7, rules), compileRules(7, rules), compileRules(8, rules)
	const n = 20_000
	counts := map[string]int{}
	same := 0
	for i := range n {
		v := Visit{Client: fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255), UserAgent: windowsUA}
		if i%2 == 1 {
			v.UserAgent = iphoneUA
		}
		_, label := rs.choose(v, nil)
		counts[label]++
		for range 3 {
			if _, l := rs.choose(v, nil); l != label {
				t.Fatalf("visitor %d got %s, then %s", i, label, l)
			}
		}
		if _, l := again.choose(v, nil); l != label {
			t.Fatalf("visitor %d got %s, and %s from another compilation", i, label, l)
		}
		if _, l := other.choose(v, nil); l == label {
			same++
		}
	}
	for label, want := range map[string]float64{"ab/a": 0.7, "ab/b": 0.2, "ab/2": 0.1} {
		if got := float64(counts[label]) / n; got < want-0.015 || got > want+0.015 {
			t.Errorf("arm %s took %.3f of the visitors, want %.2f ± 0.015 (counts %v)", label, got, want, counts)
		}
	}
	// Independent splits agree as often as chance says: 0.7² + 0.2² + 0.1² = 0.54.
	if got := float64(same) / n; got < 0.50 || got > 0.58 {
		t.Errorf("another link's split agreed for %.3f of the visitors, want about 0.54", got)
	}
}

func TestPreferredLanguage(t *testing.T) {
	t.Parallel()
	tests := []struct{ header, want string }{
		{"", ""},
		{"de", "de"},
		{"en-US,en;q=0.9", "en-US"},
		{"fr;q=0.4, de;q=0.9, *;q=1", "de"},
		{"da, en-gb;q=0.8, en;q=0.7", "da"},
		{"en;q=0, fr;q=0.001", "fr"},
		{"en;q=bad, fr;q=0.5", "fr"},
		{"*", ""},
	}
	for _, tt := range tests {
		if got := preferredLanguage(tt.header); got != tt.want {
			t.Errorf("preferredLanguage(%q) = %q, want %q", tt.header, got, tt.want)
		}
	}
}

func TestRulesEncoding(t *testing.T) {
	t.Parallel()
	rules := []Rule{{Name: "ios", If: Conditions{OS: []string{"ios"}}, URL: "https://example.com/"}}
	enc := EncodeRules(rules)
	if enc != `[{"name":"ios","if":{"os":["ios"]},"url":"https://example.com/"}]` {
		t.Errorf("EncodeRules = %s", enc)
	}
	if got, err := DecodeRules(enc); err != nil || len(got) != 1 || got[0].If.OS[0] != "ios" {
		t.Errorf("DecodeRules = %+v, %v", got, err)
	}
	if EncodeRules(nil) != "" {
		t.Error("EncodeRules(nil) is not empty")
	}
	if _, err := DecodeRules("{"); err == nil {
		t.Error("DecodeRules of junk succeeded")
	}
}

func BenchmarkChoose(b *testing.B) {
	rules := []Rule{
		{Name: "ios", If: Conditions{OS: []string{"ios"}}, URL: "https://apps.apple.com/x"},
		{If: Conditions{Device: []string{"mobile"}, Language: []string{"de"}}, URL: "https://example.de/"},
		{If: Conditions{Country: []string{"FR", "BE"}}, URL: "https://example.fr/"},
		{If: Conditions{Query: map[string]string{"utm_source": "x"}}, URL: "https://example.com/x"},
		{Split: []Arm{{URL: "https://example.com/a", Weight: 70}, {URL: "https://example.com/b", Weight: 30}}},
	}
	rs := compileRules(1, rules)
	geo := addrGeo{netip.MustParseAddr("192.0.2.1"): "US"}
	v := Visit{UserAgent: windowsUA, AcceptLanguage: "en-US,en;q=0.9,de;q=0.8", RawQuery: "utm_source=y&a=b", Client: "192.0.2.1"}
	rs.choose(v, geo) // builds the parser
	b.ReportAllocs()
	for b.Loop() {
		if _, label := rs.choose(v, geo); label != "rules[4]/0" && label != "rules[4]/1" {
			b.Fatalf("label %s", label)
		}
	}
}
