package auth

import (
	"encoding/base64"
	"strings"
)

// secretLen is the length of every secret NewKey makes: the prefix and
// 32 bytes in unpadded base64url.
var secretLen = len(secretPrefix) + base64.RawURLEncoding.EncodedLen(32)

// Plausible reports whether secret has the shape of a key NewKey makes
// ("sk_" and 43 base64url characters). Callers on hot paths use it to
// refuse made-up keys without asking the store; it proves nothing more.
func Plausible(secret string) bool {
	rest, ok := strings.CutPrefix(secret, secretPrefix)
	if !ok || len(secret) != secretLen {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
