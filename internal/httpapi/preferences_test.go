package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/notify"
)

// setupPreferences serves the preference routes over a notification
// service on the bundle's SQLite store, with a fixed clock. The
// preference and settings routes need no queue or providers.
func setupPreferences(t *testing.T, now time.Time) (*Server, *notify.Service) {
	t.Helper()
	b := setup(t)
	clock := func() time.Time { return now }
	svc := notify.NewService(notify.Options{Store: b.db, Now: clock})
	srv := New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Now: clock, Preferences: svc, Notify: svc,
		UI: UIOptions{Secret: []byte("0123456789abcdef0123456789abcdef"), PublicURL: "https://n.example.com"}})
	return srv, svc
}

func TestPreferenceLinks(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	srv, _ := setupPreferences(t, now)
	do := func(method, path, token, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.RemoteAddr, req.Host = "127.0.0.1:1", "localhost"
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set(headerPreferenceToken, token)
		}
		return record(t, srv, req)
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

// TestPreferencePageChangesSettings mints a preference link, changes a
// switch through it as the page does, and finds the change in the user's
// settings; turning critical off is refused with 422.
func TestPreferencePageChangesSettings(t *testing.T) {
	t.Parallel()
	srv, svc := setupPreferences(t, time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	do := func(method, path, token, body string) (int, []byte) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.RemoteAddr, req.Host = "127.0.0.1:1", "localhost"
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("X-Preference-Token", token)
		}
		rec := record(t, srv, req)
		return rec.Code, rec.Body.Bytes()
	}

	code, body := do("POST", "/v1/users/ann/preference-link", "", "")
	if code != 200 {
		t.Fatalf("mint link = %d %s", code, body)
	}
	var link struct{ URL, Token string }
	if err := json.Unmarshal(body, &link); err != nil || link.Token == "" || !strings.Contains(link.URL, "#t="+link.Token) {
		t.Fatalf("link = %s (%v)", body, err)
	}

	if code, _ := do("GET", "/v1/preferences", "forged.0.token", ""); code != 401 {
		t.Errorf("forged token: status %d, want 401", code)
	}
	code, body = do("GET", "/v1/preferences", link.Token, "")
	if code != 200 || !strings.Contains(string(body), `"marketing":true`) {
		t.Fatalf("preferences = %d %s, want marketing on by default", code, body)
	}
	code, body = do("PUT", "/v1/preferences", link.Token, `{"categories":{"marketing":false},"channels":{"sms":false}}`)
	if code != 200 {
		t.Fatalf("turn marketing off = %d %s", code, body)
	}
	code, body = do("PUT", "/v1/preferences", link.Token, `{"categories":{"critical":false}}`)
	if code != 422 || !strings.Contains(string(body), "critical") {
		t.Errorf("turn critical off = %d %s, want 422 naming critical", code, body)
	}

	code, body = do("GET", "/v1/users/ann/settings", "", "")
	if code != 200 {
		t.Fatalf("settings = %d %s", code, body)
	}
	var st struct {
		Channels   map[string]bool
		Categories map[string]bool
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Categories["marketing"] || !st.Categories["critical"] || st.Channels["sms"] || !st.Channels["email"] {
		t.Errorf("settings after the page = %s; want marketing and sms off, critical and email on", body)
	}
	if got, err := svc.Settings(t.Context(), "ann"); err != nil || got.Categories[notify.Marketing] || got.Channels[notify.SMS] {
		t.Errorf("service settings after the page = %+v, %v; want marketing and sms off", got, err)
	}
}
