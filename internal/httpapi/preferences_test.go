package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// memPrefs keeps switches in memory with the notification service's two
// rules; the real adapter is tested end to end in cmd/sluice.
type memPrefs struct {
	mu sync.Mutex
	m  map[string]PreferenceSwitches
}

func (p *memPrefs) Switches(_ context.Context, user string) (PreferenceSwitches, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sw, ok := p.m[user]; ok {
		return sw, nil
	}
	return PreferenceSwitches{Channels: map[string]bool{"email": true, "sms": true}, Categories: map[string]bool{"critical": true, "marketing": true}}, nil
}

func (p *memPrefs) SetSwitches(ctx context.Context, user string, in PreferenceSwitches) (PreferenceSwitches, error) {
	cur, _ := p.Switches(ctx, user)
	for k, v := range in.Channels {
		cur.Channels[k] = v
	}
	for k, v := range in.Categories {
		cur.Categories[k] = v
	}
	if !cur.Categories["critical"] {
		return PreferenceSwitches{}, apperr.Fields(apperr.Unprocessable, "invalid", []apperr.FieldError{{Field: "categories.critical", Detail: "cannot be turned off"}})
	}
	p.mu.Lock()
	p.m[user] = cur
	p.mu.Unlock()
	return cur, nil
}

func TestPreferenceLinks(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	b := setup(t)
	srv := New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Now: clock, Preferences: &memPrefs{m: map[string]PreferenceSwitches{}},
		UI: UIOptions{Secret: []byte("0123456789abcdef0123456789abcdef"), PublicURL: "https://n.example.com"}})
	do := func(method, path, token, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:1"
		if token != "" {
			req.Header.Set(headerPreferenceToken, token)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	rec := do("POST", "/v1/users/u%2F1/preference-link", "", `{"ttl":"48h"}`)
	var link struct {
		URL, Token string
		ExpiresAt  time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &link); rec.Code != 200 || err != nil {
		t.Fatalf("mint = %d %s", rec.Code, rec.Body)
	}
	if !strings.HasPrefix(link.URL, "https://n.example.com/ui/preferences#t=") || !link.ExpiresAt.Equal(now.Add(48*time.Hour)) {
		t.Errorf("link = %+v", link)
	}
	if rec := do("GET", "/v1/preferences", link.Token, ""); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"user_id":"u/1"`) ||
		!strings.Contains(rec.Body.String(), `"locked":["categories.critical"]`) {
		t.Errorf("GET = %d %s", rec.Code, rec.Body)
	}
	if rec := do("PUT", "/v1/preferences", link.Token, `{"categories":{"marketing":false}}`); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"marketing":false`) {
		t.Errorf("PUT marketing off = %d %s", rec.Code, rec.Body)
	}
	if rec := do("PUT", "/v1/preferences", link.Token, `{"categories":{"critical":false}}`); rec.Code != 422 || !strings.Contains(rec.Body.String(), "categories.critical") {
		t.Errorf("PUT critical off = %d %s, want 422 naming the field", rec.Code, rec.Body)
	}
	// Forged, retargeted, expired and missing tokens are refused alike.
	other := newSigner([]byte("another secret, another server..")).preferenceToken("u/1", now.Add(time.Hour))
	parts := strings.Split(link.Token, ".")
	retargeted := "dTI." + parts[1] + "." + parts[2] // u2 with u/1's signature
	expired := srv.auth.signer.preferenceToken("u/1", now.Add(-time.Second))
	for _, tok := range []string{other, retargeted, expired, "", "a.b"} {
		if rec := do("GET", "/v1/preferences", tok, ""); rec.Code != http.StatusUnauthorized {
			t.Errorf("GET with token %q = %d, want 401", tok, rec.Code)
		}
	}
	if rec := do("POST", "/v1/users/u1/preference-link", "", `{"ttl":"10000h"}`); rec.Code != 422 {
		t.Errorf("mint with a too long ttl = %d, want 422", rec.Code)
	}
}
