// Package auth holds Sluice's API keys and scopes: how a key is made, how it
// is stored (only its SHA-256 hash), and what each scope allows. It knows
// nothing of HTTP or storage engines; the record store keeps Keys, and the
// services that check them (the HTTP API, the gateway, the Envoy service)
// share one Cache of the answers.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Scope is a permission carried by an API key.
type Scope string

// The scopes an API key can hold (docs/api.md). Admin allows everything.
const (
	ScopeAdmin          Scope = "admin"
	ScopeRatelimitCheck Scope = "ratelimit:check"
	ScopeNotifySend     Scope = "notify:send"
	ScopeNotifyRead     Scope = "notify:read"
	ScopeLinksWrite     Scope = "links:write"
)

// Scopes lists every scope, in a stable order.
var Scopes = []Scope{ScopeAdmin, ScopeRatelimitCheck, ScopeNotifySend, ScopeNotifyRead, ScopeLinksWrite}

// ParseScope returns the Scope named s, or an error naming the valid ones.
func ParseScope(s string) (Scope, error) {
	if slices.Contains(Scopes, Scope(s)) {
		return Scope(s), nil
	}
	names := make([]string, len(Scopes))
	for i, sc := range Scopes {
		names[i] = string(sc)
	}
	return "", fmt.Errorf("unknown scope %q (valid: %s)", s, strings.Join(names, ", "))
}

// secretPrefix starts every key so that leaked keys are easy to grep for.
const secretPrefix = "sk_"

// Key is a stored API key. The secret itself is never stored: Hash is the
// hex SHA-256 of it. A key is active while RevokedAt is zero.
type Key struct {
	ID        string
	Name      string
	Prefix    string // the secret's first characters, for people to recognise it
	Hash      string
	Scopes    []Scope
	CreatedAt time.Time
	RevokedAt time.Time
}

// Active reports whether the key has not been revoked.
func (k Key) Active() bool { return k.RevokedAt.IsZero() }

// Allows reports whether the key grants scope s. Admin grants every scope.
func (k Key) Allows(s Scope) bool {
	return k.Active() && (slices.Contains(k.Scopes, ScopeAdmin) || slices.Contains(k.Scopes, s))
}

// NewKey makes a key with 32 random bytes from r (crypto/rand when nil) and
// returns the secret, to show once, and the Key to store.
func NewKey(name string, scopes []Scope, now time.Time, r io.Reader) (secret string, k Key, err error) {
	if r == nil {
		r = rand.Reader
	}
	var raw [32]byte
	if _, err := io.ReadFull(r, raw[:]); err != nil {
		return "", Key{}, fmt.Errorf("read random: %w", err)
	}
	var id [8]byte
	if _, err := io.ReadFull(r, id[:]); err != nil {
		return "", Key{}, fmt.Errorf("read random: %w", err)
	}
	secret = secretPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	return secret, Key{
		ID:        "key_" + hex.EncodeToString(id[:]),
		Name:      name,
		Prefix:    secret[:len(secretPrefix)+6],
		Hash:      HashSecret(secret),
		Scopes:    slices.Clone(scopes),
		CreatedAt: now,
	}, nil
}

// HashSecret returns the stored form of a secret. Keys carry 256 random bits,
// so a fast hash is enough: there is nothing to brute-force.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
