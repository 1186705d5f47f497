package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/inbox"
)

// TestPageLinksIgnoreAForeignHost: on a node with API keys and no
// ui.public_url, a caller allowed to mint links who writes
// Host: evil.example gets 503 problem+json, not a signed preference or
// inbox link to evil.example (which the user, trusting the message,
// would open, handing the attacker a valid token); a Host in
// --allowed-hosts, or ui.public_url when set, make the link.
func TestPageLinksIgnoreAForeignHost(t *testing.T) {
	t.Parallel()
	b := setupInbox(t, inbox.Options{}, nil)
	b.srv = New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Inbox: b.inbox, AllowedHosts: []string{"notify.example.com"}})
	sender := b.addKey(t, auth.ScopeNotifySend)
	withURL := New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db, Inbox: b.inbox, UI: UIOptions{PublicURL: "https://notify.example.com/"}})
	// The listeners are loopback ones; the client connects to them while
	// writing whatever Host it likes.
	ts, tsURL := httptest.NewServer(b.srv), httptest.NewServer(withURL)
	t.Cleanup(ts.Close)
	t.Cleanup(tsURL.Close)
	for _, path := range []string{"/v1/users/u1/preference-link", "/v1/users/u1/inbox-token"} {
		tests := []struct {
			name, base, host string
			wantStatus       int
			wantURL          string
		}{
			{"an attacker's Host", ts.URL, "evil.example", 503, ""},
			{"an allowed host", ts.URL, "notify.example.com", 200, "http://notify.example.com/ui/"},
			{"ui.public_url, whatever the Host", tsURL.URL, "evil.example", 200, "https://notify.example.com/ui/"},
		}
		for _, tt := range tests {
			st, h, body := wire(t, "POST", tt.base+path, sender, "", http.Header{"Host": {tt.host}})
			var got struct{ URL string }
			_ = json.Unmarshal(body, &got)
			if st != tt.wantStatus || !strings.HasPrefix(got.URL, tt.wantURL) || strings.Contains(string(body), "evil.example") {
				t.Errorf("%s %s: %d %s, want %d and a link under %q", path, tt.name, st, body, tt.wantStatus, tt.wantURL)
			}
			if st >= 400 && h.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s %s: Content-Type %q, want problem+json", path, tt.name, h.Get("Content-Type"))
			}
		}
	}
}
