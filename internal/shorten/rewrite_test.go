package shorten

import (
	"errors"
	"strings"
	"testing"
)

func TestRewriteLinks(t *testing.T) {
	t.Parallel()
	short := func(u string) (string, error) {
		if strings.Contains(u, "fail") {
			return "", errors.New("shortener down")
		}
		return "https://s.io/" + strings.ToUpper(u[len(u)-1:]), nil
	}
	tests := []struct{ name, in, want string }{
		{"no link", "Your code is 123456", "Your code is 123456"},
		{"one link", "Track it: https://shop.example/o/42", "Track it: https://s.io/2"},
		{"sentence end", "See https://shop.example/a.", "See https://s.io/A."},
		{"parentheses", "(details: http://x.example/b)", "(details: https://s.io/B)"},
		{"balanced parentheses kept", "https://en.wikipedia.org/wiki/Go_(language) ok", "https://s.io/) ok"},
		{"two links", "a https://x.io/c b https://y.io/d", "a https://s.io/C b https://s.io/D"},
		{"failure keeps the long link", "go https://x.io/fail now", "go https://x.io/fail now"},
		{"not a word suffix", "xhttps://x.io/e", "xhttps://x.io/e"},
		{"scheme only", "https:// nothing", "https:// nothing"},
		{"upper-case scheme", "HTTPS://X.IO/F!", "https://s.io/F!"},
		{"quotes end a link", `"https://x.io/g"`, `"https://s.io/G"`},
		{"query and fragment", "https://x.io/p?a=1&b=2#h,", "https://s.io/H,"},
		{"other schemes untouched", "ftp://x.io/a mailto:a@b.c", "ftp://x.io/a mailto:a@b.c"},
	}
	for _, tt := range tests {
		if got := RewriteLinks(tt.in, short); got != tt.want {
			t.Errorf("%s: RewriteLinks(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

func FuzzRewriteLinks(f *testing.F) {
	f.Add("see https://x.io/a. and (http://y.io/b)")
	f.Fuzz(func(t *testing.T, body string) {
		var seen []string
		identity := func(u string) (string, error) { seen = append(seen, u); return u, nil }
		if got := RewriteLinks(body, identity); got != body {
			t.Fatalf("identity shortener changed %q to %q", body, got)
		}
		for _, u := range seen {
			if !strings.HasPrefix(strings.ToLower(u), "http") || strings.ContainsAny(u, " \n\t<>\"") {
				t.Fatalf("found link %q in %q", u, body)
			}
		}
		failing := func(string) (string, error) { return "", errors.New("down") }
		if got := RewriteLinks(body, failing); got != body {
			t.Fatalf("failing shortener changed %q to %q", body, got)
		}
	})
}
