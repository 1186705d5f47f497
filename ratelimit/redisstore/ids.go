package redisstore

import (
	"encoding/base64"
	"strings"
)

// Reservation ids become part of a Redis key name, so only ids of the
// shape this package takes and issues are let near one: 1 to maxIDBytes
// of letters, digits, '-' and '_' (ratelimit's reservations use 32
// hex digits; limits adds "local-"), then on a Cluster '~' and the
// unpadded base64url of the first check's hash tag, which must not hold
// a closing brace. Anything else is no reservation, without a round trip.

// maxIDBytes bounds the id a caller gives Hold; maxTagBytes the hash tag
// a Cluster id carries.
const (
	maxIDBytes  = 64
	maxTagBytes = 2048
)

// validID reports whether id can name a reservation of this store.
func (s *Store) validID(id string) bool {
	rid, tag, cut := strings.Cut(id, "~")
	if !plainID(rid) || cut != s.cluster {
		return false
	}
	if !cut {
		return true
	}
	if len(tag) > base64.RawURLEncoding.EncodedLen(maxTagBytes) {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(tag)
	return err == nil && len(b) > 0 && base64.RawURLEncoding.EncodeToString(b) == tag && !strings.Contains(string(b), "}")
}

// plainID reports whether id is 1 to maxIDBytes of [A-Za-z0-9_-].
func plainID(id string) bool {
	if len(id) == 0 || len(id) > maxIDBytes {
		return false
	}
	for i := range len(id) {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
