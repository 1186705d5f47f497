package shorten

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzChoose feeds arbitrary User-Agents, Accept-Language headers, query
// strings and client addresses (all untrusted) to a set of rules: choose
// never panics, and answers a rule's target and label or the default.
func FuzzChoose(f *testing.F) {
	rules := []Rule{
		{Name: "ios", If: Conditions{OS: []string{"ios"}}, URL: "https://e.com/ios"},
		{If: Conditions{Device: []string{"mobile", "bot"}, Language: []string{"de", "pt-BR"}}, URL: "https://e.com/de"},
		{Name: "fr", If: Conditions{Country: []string{"FR"}}, URL: "https://e.com/fr"},
		{Name: "q", If: Conditions{Query: map[string]string{"utm_source": "x", "ref": "*"}}, URL: "https://e.com/q"},
		{Name: "ab", If: Conditions{OS: []string{"windows", "linux"}}, Split: []Arm{{URL: "https://e.com/a", Weight: 3}, {URL: "https://e.com/b", Weight: 1}}},
	}
	rs := compileRules(5, rules)
	geo := addrGeo{netip.MustParseAddr("192.0.2.1"): "FR"}
	f.Add(iphoneUA, "de-CH,de;q=0.9", "utm_source=x&ref=1", "192.0.2.1")
	f.Add(windowsUA, "*;q=0.5, en;q=1.0, de;q=0.99999", "%zz=1&ref&&=", "::ffff:192.0.2.1")
	f.Add("", ";;,,;q=", "a=%", "not an address")
	valid := map[string]string{"ios": "https://e.com/ios", "rules[1]": "https://e.com/de", "fr": "https://e.com/fr",
		"q": "https://e.com/q", "ab/0": "https://e.com/a", "ab/1": "https://e.com/b", DefaultTarget: ""}
	f.Fuzz(func(t *testing.T, ua, lang, query, client string) {
		url, label := rs.choose(Visit{UserAgent: ua, AcceptLanguage: lang, RawQuery: query, Client: client}, geo)
		want, ok := valid[label]
		if !ok || url != want {
			t.Fatalf("choose = %q, %q; not a rule's target", url, label)
		}
		if tag := preferredLanguage(lang); !strings.Contains(lang, tag) {
			t.Fatalf("preferredLanguage(%q) = %q, not a part of it", lang, tag)
		}
	})
}
