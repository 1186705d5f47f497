package auth

import (
	"strings"
	"testing"
	"time"
)

func TestPlausible(t *testing.T) {
	t.Parallel()
	secret, _, err := NewKey("k", nil, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, secret string
		want         bool
	}{
		{"a made key", secret, true},
		{"empty", "", false},
		{"no prefix", strings.TrimPrefix(secret, "sk_") + "abc", false},
		{"one short", secret[:len(secret)-1], false},
		{"one long", secret + "A", false},
		{"not base64url", secret[:len(secret)-1] + "+", false},
		{"random text", "made-up-key", false},
	}
	for _, tt := range tests {
		if got := Plausible(tt.secret); got != tt.want {
			t.Errorf("%s: Plausible(%q) = %v, want %v", tt.name, tt.secret, got, tt.want)
		}
	}
}
