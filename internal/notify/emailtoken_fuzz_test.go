package notify

import (
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzEmailToken feeds arbitrary /e/{token} path values to the token
// check that guards the store lookup: it accepts exactly the shape
// newEmailToken makes (16 URL-safe base64 characters), never panics, and
// every token the server makes passes.
func FuzzEmailToken(f *testing.F) {
	for range 4 {
		f.Add(newEmailToken())
	}
	for _, s := range []string{"", "abc", "AAAAAAAAAAAAAAA=", "AAAAAAAAAAAAAAAA/", "ÄAAAAAAAAAAAAAA", "../../etc/passwd", "%41AAAAAAAAAAAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		_, decodeErr := base64.RawURLEncoding.Strict().DecodeString(tok)
		// The decoder skips line breaks; the token check must not.
		want := len(tok) == 16 && decodeErr == nil && !strings.ContainsAny(tok, "\r\n")
		if got := validEmailToken(tok); got != want {
			t.Fatalf("validEmailToken(%q) = %v, want %v", tok, got, want)
		}
		if minted := newEmailToken(); !validEmailToken(minted) {
			t.Fatalf("newEmailToken() = %q is refused", minted)
		}
	})
}
