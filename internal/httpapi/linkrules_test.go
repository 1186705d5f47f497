package httpapi

import (
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/shorten"
)

const android = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36"

const iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"

// tableGeo locates addresses from a table.
type tableGeo map[netip.Addr]string

func (g tableGeo) Locate(a netip.Addr) (string, string) { return g[a], "" }

// setupRuledLinks is setupLinks with a GeoIP database (geo nil: none),
// behind a trusted proxy at 127.0.0.1.
func setupRuledLinks(t *testing.T, geo shorten.Geo) (*bundle, *shorten.Service) {
	t.Helper()
	b := setup(t)
	svc := newLinks(t, shorten.Options{Store: b.db, Geo: geo, Targets: ownHost})
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Links: svc,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	return b, svc
}

// TestLinkRules sets rules through the API, redirects visits that match
// each of them (the country from the client address the trusted proxy
// names) and one that matches none, and finds each click's rule recorded.
func TestLinkRules(t *testing.T) {
	t.Parallel()
	geo := tableGeo{netip.MustParseAddr("203.0.113.9"): "FR"}
	b, svc := setupRuledLinks(t, geo)
	key := b.addKey(t, auth.ScopeLinksWrite)
	if r := b.do(call{method: "POST", path: "/v1/links", key: key, body: `{"url":"https://example.com/page","slug":"promo"}`}); r.StatusCode != 201 {
		t.Fatalf("create = %d", r.StatusCode)
	}
	rules := `{"rules":[
		{"name":"ios","if":{"os":["ios"]},"url":"https://apps.example.com/app"},
		{"if":{"language":["de"]},"url":"https://example.de/"},
		{"name":"fr","if":{"country":["FR","BE"]},"url":"https://example.fr/"},
		{"name":"news","if":{"query":{"utm_source":"news"}},"url":"https://example.com/news"},
		{"name":"ab","if":{"device":["desktop"]},"split":[{"name":"a","url":"https://example.com/a","weight":50},{"name":"b","url":"https://example.com/b","weight":50}]}
	]}`
	resp := b.do(call{method: "PUT", path: "/v1/links/promo/rules", key: key, body: rules})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT rules = %d: %+v", resp.StatusCode, decodeProblem(t, resp))
	}
	if l := decodeLink(t, resp); len(l.Rules) != 5 || l.Rules[0].Name != "ios" || l.Rules[4].Split[1].Weight != 50 {
		t.Errorf("PUT rules answered %+v", l.Rules)
	}
	if l := decodeLink(t, b.do(call{method: "GET", path: "/v1/links/promo", key: key})); len(l.Rules) != 5 {
		t.Errorf("GET /v1/links/promo rules = %+v, want the five", l.Rules)
	}
	visits := []struct {
		name, path, ua, lang, forwarded string
		want                            string
	}{
		{"ios", "/promo", iphone, "de", "", "https://apps.example.com/app"},
		{"german", "/promo", android, "de-AT,de;q=0.9", "", "https://example.de/"},
		{"france", "/promo", android, "fr", "203.0.113.9", "https://example.fr/"},
		{"query", "/promo?utm_source=news", android, "", "", "https://example.com/news"},
		{"none", "/promo", android, "en", "198.51.100.1", "https://example.com/page"},
	}
	for _, v := range visits {
		h := http.Header{}
		if v.lang != "" {
			h.Set("Accept-Language", v.lang)
		}
		if v.forwarded != "" {
			h.Set("X-Forwarded-For", v.forwarded)
		}
		r := b.do(call{method: "GET", path: v.path, userAgent: v.ua, header: h})
		if r.StatusCode != http.StatusFound || r.Header.Get("Location") != v.want {
			t.Errorf("%s: GET %s = %d to %q, want 302 to %q", v.name, v.path, r.StatusCode, r.Header.Get("Location"), v.want)
		}
	}
	// A desktop browser lands in the split, on the same arm every time.
	first := ""
	for range 5 {
		loc := b.do(call{method: "GET", path: "/promo", userAgent: browser}).Header.Get("Location")
		if first == "" {
			first = loc
		}
		if loc != first || (loc != "https://example.com/a" && loc != "https://example.com/b") {
			t.Fatalf("the split sent one visitor to %q, then %q", first, loc)
		}
	}
	if err := svc.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, _ := b.db.LinkByCode(t.Context(), "", "promo")
	got, err := b.db.LinkTargetClicks(t.Context(), l.ID, time.Time{})
	arm := "ab/a"
	if first == "https://example.com/b" {
		arm = "ab/b"
	}
	want := map[string]int64{"ios": 1, "rules[1]": 1, "fr": 1, "news": 1, shorten.DefaultTarget: 1, arm: 5}
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("clicks by target = %v, %v; want %v", got, err, want)
	}

	// Removing the rules sends everyone to the link's URL again.
	if r := b.do(call{method: "PUT", path: "/v1/links/promo/rules", key: key, body: `{"rules":[]}`}); r.StatusCode != http.StatusOK {
		t.Fatalf("PUT no rules = %d", r.StatusCode)
	} else if l := decodeLink(t, r); l.Rules != nil {
		t.Errorf("PUT no rules answered rules %+v", l.Rules)
	}
	if loc := b.do(call{method: "GET", path: "/promo", userAgent: iphone}).Header.Get("Location"); loc != "https://example.com/page" {
		t.Errorf("after removing the rules, an iPhone went to %q", loc)
	}
}

func TestLinkRulesRefused(t *testing.T) {
	t.Parallel()
	b, _ := setupRuledLinks(t, nil)
	key := b.addKey(t, auth.ScopeLinksWrite)
	other := b.addKey(t, auth.ScopeLinksWrite)
	if r := b.do(call{method: "POST", path: "/v1/links", key: key, body: `{"url":"https://example.com/page","slug":"promo"}`}); r.StatusCode != 201 {
		t.Fatalf("create = %d", r.StatusCode)
	}
	tests := []struct {
		name   string
		key    string
		path   string
		body   string
		status int
		field  string
		detail string
	}{
		{"geo without a database", key, "/v1/links/promo/rules", `{"rules":[{"name":"fr","if":{"country":["FR"]},"url":"https://example.fr/"}]}`,
			422, "rules[0].if.country", `rule "fr": needs a GeoIP database`},
		{"bad os", key, "/v1/links/promo/rules", `{"rules":[{"url":"https://example.com/"},{"if":{"os":["beos"]},"url":"https://example.com/"}]}`,
			422, "rules[1].if.os[0]", "must be one of"},
		{"loop", key, "/v1/links/promo/rules", `{"rules":[{"url":"https://sho.rt/promo"}]}`, 422, "rules[0].url", "this service"},
		{"unknown condition", key, "/v1/links/promo/rules", `{"rules":[{"if":{"browser":["x"]},"url":"https://example.com/"}]}`, 400, "browser", "unknown"},
		{"another key's link", other, "/v1/links/promo/rules", `{"rules":[]}`, 404, "", ""},
		{"no link", key, "/v1/links/absent/rules", `{"rules":[]}`, 404, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.do(call{method: "PUT", path: tt.path, key: tt.key, body: tt.body})
			if r.StatusCode != tt.status {
				t.Fatalf("PUT = %d, want %d", r.StatusCode, tt.status)
			}
			p := decodeProblem(t, r)
			if tt.field == "" {
				return
			}
			for _, f := range p.Errors {
				if f.Field == tt.field && strings.Contains(f.Detail, tt.detail) {
					return
				}
			}
			t.Errorf("problem %+v; want an error on %s saying %q", p, tt.field, tt.detail)
		})
	}
	big := `{"rules":[{"url":"https://example.com/` + strings.Repeat("x", maxRulesBody) + `"}]}`
	if r := b.do(call{method: "PUT", path: "/v1/links/promo/rules", key: key, body: big}); r.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("PUT of %d bytes = %d, want 413", len(big), r.StatusCode)
	}
}
