package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRevokingTheLastKeyClosesTheAPI: on a loopback listener, keyless mode
// serves until the first key is created. An attacker (or a mistake) that
// revokes every key then finds the API closed, not keyless again: a
// loopback client without a key gets 401, on this server and on a fresh
// one over the same database (a restart); the node logs that it is
// closed, and GET /v1/session says closed for the dashboard's sign-in.
func TestRevokingTheLastKeyClosesTheAPI(t *testing.T) {
	t.Parallel()
	b, logs := setupAuthLimit(t, 100)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	if st, _, body := wire(t, "GET", ts.URL+"/v1/keys", "", "", nil); st != 200 {
		t.Fatalf("keyless GET /v1/keys: %d %s, want 200", st, body)
	}
	st, _, body := wire(t, "POST", ts.URL+"/v1/keys", "", `{"name":"only","scopes":["admin"]}`, nil)
	var k keyResponse
	if st != 201 || json.Unmarshal(body, &k) != nil || k.Key == "" {
		t.Fatalf("keyless POST /v1/keys: %d %s", st, body)
	}
	if st, _, body := wire(t, "DELETE", ts.URL+"/v1/keys/"+k.ID, k.Key, "", nil); st != 204 {
		t.Fatalf("revoking the only key: %d %s", st, body)
	}
	restarted := httptest.NewServer(New(Options{Logger: slog.New(slog.DiscardHandler), Keys: b.db}))
	t.Cleanup(restarted.Close)
	for _, base := range []string{ts.URL, restarted.URL} {
		if st, _, body := wire(t, "GET", base+"/v1/keys", "", "", nil); st != 401 {
			t.Errorf("keyless GET /v1/keys after the last key's revocation: %d %s, want 401", st, body)
		}
		if st, _, body := wire(t, "POST", base+"/v1/keys", "", `{"name":"again","scopes":["admin"]}`, nil); st != 401 {
			t.Errorf("keyless POST /v1/keys after the last key's revocation: %d %s, want 401", st, body)
		}
		var s sessionJSON
		if st, _, body := wire(t, "GET", base+"/v1/session", "", "", nil); st != 200 || json.Unmarshal(body, &s) != nil || s.Keyless || s.SignedIn || !s.Closed {
			t.Errorf("GET /v1/session: %d %s, want signed out, not keyless, closed", st, body)
		}
	}
	if !strings.Contains(logs.String(), "every API key has been revoked: the API is closed") {
		t.Errorf("the log does not say the API is closed:\n%s", logs.String())
	}
}
