package shorten

import (
	"net/url"
	"strings"
	"testing"
)

func TestWithClickIDKeepsTheQuery(t *testing.T) {
	t.Parallel()
	const id = "AbC-_9"
	tests := []struct {
		name, target, want string
	}{
		{"signed query", "https://cdn.example.com/f?t=9f2c", "https://cdn.example.com/f?t=9f2c&sluice_cid=AbC-_9"},
		{"order kept", "https://x.test/p?z=1&a=2&m=3", "https://x.test/p?z=1&a=2&m=3&sluice_cid=AbC-_9"},
		{"no query", "https://x.test/p", "https://x.test/p?sluice_cid=AbC-_9"},
		{"empty query", "https://x.test/p?", "https://x.test/p?sluice_cid=AbC-_9"},
		{"trailing ampersand", "https://x.test/p?a=1&", "https://x.test/p?a=1&sluice_cid=AbC-_9"},
		{"fragment", "https://x.test/p?a=1#top", "https://x.test/p?a=1&sluice_cid=AbC-_9#top"},
		{"fragment, no query", "https://x.test/p#top?not=query", "https://x.test/p?sluice_cid=AbC-_9#top?not=query"},
		{"empty fragment", "https://x.test/p#", "https://x.test/p?sluice_cid=AbC-_9#"},
		{"odd encodings byte for byte", "https://x.test/p?q=a+b%2fc&e=%E2%82%AC&x=%zz&flag&=v&k=a=b",
			"https://x.test/p?q=a+b%2fc&e=%E2%82%AC&x=%zz&flag&=v&k=a=b&sluice_cid=AbC-_9"},
		{"semicolons", "https://x.test/p?a=1;b=2", "https://x.test/p?a=1;b=2&sluice_cid=AbC-_9"},
		{"planted click id cut out", "https://x.test/p?a=1&sluice_cid=old&b=2", "https://x.test/p?a=1&b=2&sluice_cid=AbC-_9"},
		{"escaped planted key", "https://x.test/p?sluice%5Fcid=old", "https://x.test/p?sluice_cid=AbC-_9"},
		{"a longer key stays", "https://x.test/p?sluice_cid2=x", "https://x.test/p?sluice_cid2=x&sluice_cid=AbC-_9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := WithClickID(tt.target, id); got != tt.want {
				t.Errorf("WithClickID(%q) = %q, want %q", tt.target, got, tt.want)
			}
		})
	}
}

// FuzzWithClickID: the target's query, byte for byte, is a prefix of the
// new one (unless it carried a click id of its own, which is cut out), the
// rest of the target is unchanged, and the new query holds exactly one
// click id, this one.
func FuzzWithClickID(f *testing.F) {
	for _, s := range []string{"https://x.test/p?t=9f2c", "https://x.test/p", "https://x.test/p?a=%zz&b#f", "https://x.test/?sluice_cid=1&a", "?&&#"} {
		f.Add(s)
	}
	const id = "AbC-_9"
	f.Fuzz(func(t *testing.T, target string) {
		got := WithClickID(target, id)
		rest, frag, hasFrag := strings.Cut(target, "#")
		path, query, _ := strings.Cut(rest, "?")
		gotRest, gotFrag, gotHasFrag := strings.Cut(got, "#")
		gotPath, gotQuery, _ := strings.Cut(gotRest, "?")
		if gotPath != path || gotFrag != frag || gotHasFrag != hasFrag {
			t.Fatalf("WithClickID(%q) = %q: path or fragment changed", target, got)
		}
		planted := false
		for seg := range strings.SplitSeq(query, "&") {
			planted = planted || isClickIDParam(seg)
		}
		if !planted && !strings.HasPrefix(gotQuery, query) {
			t.Errorf("WithClickID(%q) = %q: query %q is not a prefix of %q", target, got, query, gotQuery)
		}
		if !strings.HasSuffix(gotQuery, ClickIDParam+"="+id) {
			t.Errorf("WithClickID(%q) = %q: no click id at the end of the query", target, got)
		}
		n := 0
		for seg := range strings.SplitSeq(gotQuery, "&") {
			if isClickIDParam(seg) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("WithClickID(%q) = %q: %d click ids", target, got, n)
		}
		if q, err := url.ParseQuery(gotQuery); err == nil && q.Get(ClickIDParam) != id {
			t.Errorf("WithClickID(%q) = %q: decodes to click id %q", target, got, q.Get(ClickIDParam))
		}
	})
}
