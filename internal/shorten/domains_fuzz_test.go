package shorten_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/shorten"
)

// FuzzNormalizeDomain: a name a caller sends is either refused or becomes
// a lower-case ASCII host name that normalizes to itself, that a request's
// Host of that name finds, and that cannot hide a port, a path or a key's
// separator.
func FuzzNormalizeDomain(f *testing.F) {
	for _, s := range []string{"go.example.com", "Bücher.example", "xn--bcher-kva.example", "a.b", "10.0.0.1", "go.example.com:80",
		"[::1]", "x..y", "ｇｏ.example.com", "go.example.com/x", strings.Repeat("a.", 130)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := shorten.NormalizeDomain(s)
		if err != nil {
			return
		}
		if d != strings.ToLower(d) || strings.ContainsAny(d, ":/[]@ ") || len(d) > shorten.MaxDomainLength {
			t.Fatalf("NormalizeDomain(%q) = %q: not a bare lower-case host name", s, d)
		}
		for i := 0; i < len(d); i++ {
			if d[i] >= 0x80 {
				t.Fatalf("NormalizeDomain(%q) = %q: not ASCII", s, d)
			}
		}
		if again, err := shorten.NormalizeDomain(d); err != nil || again != d {
			t.Fatalf("NormalizeDomain(%q) = %q, but NormalizeDomain(%q) = %q, %v", s, d, d, again, err)
		}
		if h := shorten.RequestHost(strings.ToUpper(d) + ":8080"); h != d {
			t.Fatalf("RequestHost of %q with a port = %q", d, h)
		}
		if dom, code := shorten.SplitKey(shorten.Key(d, "abc")); dom != d || code != "abc" {
			t.Fatalf("SplitKey(Key(%q, abc)) = %q %q", d, dom, code)
		}
	})
}
