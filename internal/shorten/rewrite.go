package shorten

import "strings"

// RewriteLinks returns body with every http:// or https:// link replaced
// by shorten(link). When shorten fails for a link, that link is kept as it
// was: a message never depends on the shortener. shorten is called once
// per occurrence, in order; a shortener that keys its links by (message,
// URL), like Service.NotificationShortener, gives repeated URLs one link.
//
// A link runs from its scheme to the first space, control character or
// one of <>"'`; trailing punctuation that usually ends a sentence
// (.,;:!?) and unbalanced closing brackets are left out of it.
func RewriteLinks(body string, shorten func(url string) (string, error)) string {
	var b strings.Builder
	rest := body
	for {
		i := indexScheme(rest)
		if i < 0 {
			if b.Len() == 0 {
				return body // no link: no copy
			}
			b.WriteString(rest)
			return b.String()
		}
		b.Grow(len(body))
		b.WriteString(rest[:i])
		rest = rest[i:]
		n := linkEnd(rest)
		link := rest[:n]
		if short, err := shorten(link); err == nil && short != "" {
			b.WriteString(short)
		} else {
			b.WriteString(link)
		}
		rest = rest[n:]
	}
}

// indexScheme finds the next "http://" or "https://" (any case) that does
// not continue a word, so "xhttp://" is not a link.
func indexScheme(s string) int {
	off := 0
	for {
		i := indexFold(s[off:], "http")
		if i < 0 {
			return -1
		}
		at := off + i
		tail := s[at+4:]
		scheme := 0
		switch {
		case strings.HasPrefix(tail, "://"):
			scheme = len("http://")
		case len(tail) > 0 && (tail[0] == 's' || tail[0] == 'S') && strings.HasPrefix(tail[1:], "://"):
			scheme = len("https://")
		}
		if scheme > 0 && (at == 0 || !isWordByte(s[at-1])) && linkEnd(s[at:]) > scheme {
			return at
		}
		off = at + 4
	}
}

// indexFold is strings.Index ignoring ASCII case, for a lower-case needle.
func indexFold(s, lower string) int {
	for i := 0; i+len(lower) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(lower)], lower) {
			return i
		}
	}
	return -1
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// linkEnd returns the length of the link at the start of s.
func linkEnd(s string) int {
	n := 0
	for n < len(s) {
		c := s[n]
		if c <= ' ' || c == 0x7f || strings.IndexByte("<>\"'`", c) >= 0 {
			break
		}
		n++
	}
	// Leave out what reads as the end of a sentence or an enclosing
	// bracket: "see https://x.io/a." or "(https://x.io/a)".
	for n > 0 {
		c := s[n-1]
		if strings.IndexByte(".,;:!?", c) >= 0 {
			n--
			continue
		}
		if open, ok := closing[c]; ok && strings.Count(s[:n], string(open)) < strings.Count(s[:n], string(c)) {
			n--
			continue
		}
		break
	}
	return n
}

var closing = map[byte]byte{')': '(', ']': '[', '}': '{'}
