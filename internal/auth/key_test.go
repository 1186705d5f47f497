package auth

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestNewKey(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	secret, k, err := NewKey("ops", []Scope{ScopeNotifySend}, now, bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "sk_") || len(secret) != 3+43 {
		t.Errorf("secret = %q, want sk_ and 43 base64url characters", secret)
	}
	if k.Hash != HashSecret(secret) || strings.Contains(k.Hash, secret) {
		t.Errorf("stored hash %q does not match the secret's hash", k.Hash)
	}
	if !strings.HasPrefix(secret, k.Prefix) || len(k.Prefix) != 9 {
		t.Errorf("prefix = %q, want the secret's first 9 characters", k.Prefix)
	}
	if !k.CreatedAt.Equal(now) || !strings.HasPrefix(k.ID, "key_") {
		t.Errorf("key = %+v", k)
	}
	s2, _, _ := NewKey("ops", nil, now, nil)
	if s2 == secret {
		t.Error("two keys share a secret")
	}
	if _, _, err := NewKey("x", nil, now, strings.NewReader("short")); err == nil {
		t.Error("NewKey with a failing random source: want an error")
	}
}

func TestAllows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		key     Key
		scope   Scope
		allowed bool
	}{
		{"own scope", Key{Scopes: []Scope{ScopeNotifySend}}, ScopeNotifySend, true},
		{"other scope", Key{Scopes: []Scope{ScopeNotifySend}}, ScopeNotifyRead, false},
		{"admin grants all", Key{Scopes: []Scope{ScopeAdmin}}, ScopeLinksWrite, true},
		{"revoked grants nothing", Key{Scopes: []Scope{ScopeAdmin}, RevokedAt: time.Unix(1, 0)}, ScopeLinksWrite, false},
		{"no scopes", Key{}, ScopeRatelimitCheck, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.key.Allows(tt.scope); got != tt.allowed {
				t.Errorf("Allows(%q) = %v, want %v", tt.scope, got, tt.allowed)
			}
		})
	}
}

func TestParseScope(t *testing.T) {
	t.Parallel()
	for _, s := range Scopes {
		if got, err := ParseScope(string(s)); err != nil || got != s {
			t.Errorf("ParseScope(%q) = %q, %v", s, got, err)
		}
	}
	if _, err := ParseScope("root"); err == nil || !strings.Contains(err.Error(), "admin") {
		t.Errorf("ParseScope(root) error = %v, want the valid scopes listed", err)
	}
}
